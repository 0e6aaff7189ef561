package main

// The bounded-memory measurement (docs/DESIGN.md#compact-bounds): a forced
// compaction of one large transcript, with the process's extra resident
// set measured from a reset high-water mark.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/compact"
)

// procStatusKB returns a field of /proc/self/status in KiB (VmRSS, VmHWM).
func procStatusKB(field string) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.Atoi(f[1])
			return kb
		}
	}
	return 0
}

// resetHWM resets the process's VmHWM to its current RSS (Linux 4.0+:
// "5" to clear_refs).
func resetHWM() {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		log.Fatalf("resetting VmHWM: %v", err)
	}
}

type forceResult struct {
	bytes, messages int
	storedBytes     int64
	baseKB, hwmKB   int
	compact         time.Duration
	res             compact.Result
}

// forceRSS ingests a transcript of about mb megabytes (the bench's agent
// work) into a fresh store whose size limit admits it, frees everything
// the ingest held, resets VmHWM, and runs one forced compaction: the
// extra RSS is VmHWM after minus VmRSS before.
func forceRSS(mb int, files []srcFile) forceResult {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "bench-compact-rss-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := compact.OpenStore(filepath.Join(dir, "compact.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	c, err := compact.NewCompressor(store, compact.Config{MaxTranscriptBytes: compact.MaxTranscriptBytesLimit})
	if err != nil {
		log.Fatal(err)
	}
	sess, err := store.CreateSession(ctx, compact.SessionOptions{})
	if err != nil {
		log.Fatal(err)
	}
	var r forceResult
	func() {
		g := &transcript{files: files}
		var batch []byte
		flush := func() {
			if len(batch) > 0 {
				if _, err := c.AppendLines(ctx, sess.ID, batch); err != nil {
					log.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		batch = append(jsonLines([]compact.Message{{Role: compact.RoleSystem, Content: systemPrompt}}), batch...)
		for r.bytes < mb<<20 {
			data := jsonLines(g.next())
			sc := bufio.NewScanner(bytes.NewReader(data))
			sc.Buffer(make([]byte, 1<<20), 1<<22)
			for sc.Scan() {
				r.messages++
			}
			r.bytes += len(data)
			batch = append(batch, data...)
			if len(batch) > 512<<10 {
				flush()
			}
		}
		flush()
	}()
	s, err := store.Session(ctx, sess.ID)
	if err != nil {
		log.Fatal(err)
	}
	r.storedBytes = s.Bytes
	runtime.GC()
	debug.FreeOSMemory()
	resetHWM()
	r.baseKB = procStatusKB("VmRSS")
	start := time.Now()
	r.res, err = c.Compact(ctx, sess.ID, true)
	r.compact = time.Since(start)
	r.hwmKB = procStatusKB("VmHWM")
	if err != nil {
		log.Fatal(err)
	}
	if !r.res.Compacted {
		log.Fatalf("%d MB: not compacted: %s", mb, r.res.Reason)
	}
	return r
}

// printForce prints the forced-compaction table for the sizes mbs.
func printForce(mbs []int, files []srcFile) {
	tableHeader("Forced compaction of one large transcript: extra RSS",
		"transcript MB (JSON lines)", "stored bytes", "messages", "compact", "RSS before MB", "VmHWM during MB", "extra MB", "tokens before", "tokens after")
	for _, mb := range mbs {
		r := forceRSS(mb, files)
		fmt.Printf("| %.1f | %d | %d | %s | %d | %d | %d | %d | %d |\n", float64(r.bytes)/1e6, r.storedBytes, r.messages, dur(r.compact),
			r.baseKB/1024, r.hwmKB/1024, (r.hwmKB-r.baseKB)/1024, r.res.OriginalTokens, r.res.CompactedTokens)
	}
	fmt.Println()
}

// emit writes a transcript of about mb megabytes of the bench's agent work
// to stdout as JSON lines.
func emit(mb int, files []srcFile) {
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	g := &transcript{files: files}
	n, _ := w.Write(jsonLines([]compact.Message{{Role: compact.RoleSystem, Content: systemPrompt}}))
	for n < mb<<20 {
		k, err := w.Write(jsonLines(g.next()))
		if err != nil {
			log.Fatal(err)
		}
		n += k
	}
}
