package daemon

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rubinofs/rubinofs/guard"
)

// TestDenialLogBounded: a flood of refusals writes at most the burst and
// then the rate's worth of records; the records left out are counted in
// one record written before the next refusal's, once the clock lets one
// through.
func TestDenialLogBounded(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, nil))
	clock := time.Unix(1_800_000_000, 0)
	log := denialLogger(l, func() time.Time { return clock })
	d := guard.Denial{Session: "s", Pid: 1, Comm: "python3", Op: "open", Path: "f", Code: "unread"}
	const flood = 10_000
	for range flood {
		log(d)
	}
	count := func(s string) int { mu.Lock(); defer mu.Unlock(); return strings.Count(buf.String(), s) }
	if n := count("guard refused a mutation"); n != denialLogBurst {
		t.Fatalf("%d refusals at one instant logged %d records, want the burst, %d", flood, n, denialLogBurst)
	}
	if n := count("not logged"); n != 0 {
		t.Fatalf("a summary was written before a record was let through: %d", n)
	}
	clock = clock.Add(time.Second / time.Duration(denialLogRate)) // one record's worth
	log(d)
	want := "msg=\"guard refusals not logged: over the rate limit\" count=" + strconv.Itoa(flood-denialLogBurst)
	if count(want) != 1 || count("guard refused a mutation") != denialLogBurst+1 {
		t.Fatalf("after the clock let one through: want one %q and %d refusal records, got:\n%s", want, denialLogBurst+1, tail(&mu, &buf))
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func tail(mu *sync.Mutex, b *bytes.Buffer) string {
	mu.Lock()
	defer mu.Unlock()
	s := b.String()
	if len(s) > 600 {
		s = s[len(s)-600:]
	}
	return s
}
