package tasks

import (
	"strings"
	"unicode/utf8"
)

// Bounds of the live views (the activity ring and the output tail), so a
// chatty task cannot grow its entry.
const (
	// ActivityLogMax is how many recent activity lines the ring keeps.
	ActivityLogMax = 6
	// OutputTailMax is how many complete output lines the tail keeps; the
	// buffer holds one more slot for the in-flight partial line.
	OutputTailMax = 6
	// OutputTailLineMax is the byte cap of one buffered output line (cut on
	// a UTF-8 boundary), so a newline-free stream cannot grow a line.
	OutputTailLineMax = 200
)

// RecordToolStarted records a tool starting: bumps the tool counter and
// sets the last activity. No-op for an unknown id.
func (r *Registry) RecordToolStarted(id, activity string) {
	r.update(id, func(e *entry) {
		e.ToolCount++
		e.LastActivity = activity
	})
}

// RecordToolFinished appends line to the activity ring (at most
// ActivityLogMax, oldest dropped) and clears the output tail, which belonged
// to the tool that finished. No-op for an unknown id.
func (r *Registry) RecordToolFinished(id, line string) {
	r.update(id, func(e *entry) {
		e.Activity = appendRing(e.Activity, line)
		e.Output = nil
	})
}

// noteActivity appends a runner event to the ring without touching the
// tool counter or the output tail.
func (r *Registry) noteActivity(id, line string) {
	r.update(id, func(e *entry) { e.Activity = appendRing(e.Activity, line) })
}

func appendRing(ring []string, line string) []string {
	ring = append(ring, line)
	if len(ring) > ActivityLogMax {
		ring = append(ring[:0:0], ring[len(ring)-ActivityLogMax:]...)
	}
	return ring
}

// RecordToolOutput folds a chunk of streamed output into the live tail: it
// splits on "\n" (a trailing "\r" is dropped: CRLF reads as LF), appends to
// the in-flight partial line, cuts every line at OutputTailLineMax bytes,
// and keeps OutputTailMax complete lines plus the partial one. No-op for an
// unknown id.
func (r *Registry) RecordToolOutput(id, chunk string) {
	r.update(id, func(e *entry) { e.Output = appendTail(e.Output, chunk) })
}

func appendTail(tail []string, chunk string) []string {
	if len(tail) == 0 {
		tail = []string{""}
	}
	for len(chunk) > 0 {
		line, nl := chunk, false
		if i := strings.IndexByte(chunk, '\n'); i >= 0 {
			line, chunk, nl = chunk[:i], chunk[i+1:], true
		} else {
			chunk = ""
		}
		line = strings.TrimSuffix(line, "\r") // CRLF line ends read as LF
		last := len(tail) - 1
		if len(tail[last]) < OutputTailLineMax {
			tail[last] = cutLine(tail[last] + cutLine(line))
		}
		if nl {
			tail = append(tail, "")
			if len(tail) > OutputTailMax+1 {
				tail = append(tail[:0:0], tail[len(tail)-OutputTailMax-1:]...)
			}
		}
	}
	return tail
}

// cutLine cuts s to at most OutputTailLineMax bytes on a rune boundary.
func cutLine(s string) string {
	if len(s) <= OutputTailLineMax {
		return s
	}
	i := OutputTailLineMax
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// RecordLiveProbe records a probe of the task: bumps the probe count and
// stamps the time. It returns the new count, or false for an unknown id.
func (r *Registry) RecordLiveProbe(id string) (int, bool) {
	n := 0
	ok := r.update(id, func(e *entry) {
		e.ProbeCount++
		e.LastProbe = r.now()
		n = e.ProbeCount
	})
	return n, ok
}
