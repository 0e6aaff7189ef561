package watcher

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ownBytes recounts what the own tables hold, as ownbound.go estimates it.
// Called with mu held.
func (t *ownTable) recount() int64 {
	var n int64
	for rel := range t.paths {
		n += int64(len(rel) + pathCost)
	}
	n += int64(len(t.ids)) * idCost
	for i := range t.moves {
		n += t.moves[i].cost()
	}
	return n
}

// TestSettledNameRecordsDropped: a name's record kept after an own change
// that left the name existing decides nothing, so the next prune drops it
// whatever its age; the identity's record stays and still makes the
// change's events own. A removed name's record stays for its TTL.
func TestSettledNameRecordsDropped(t *testing.T) {
	root := t.TempDir()
	r := newRec(t)
	w := start(t, r.config(root))
	for i := 0; i < 20; i++ {
		name := "f" + strconv.Itoa(i)
		own(t, w, func() error { return os.WriteFile(filepath.Join(root, name), []byte("own\n"), 0o644) }, name)
	}
	write(t, filepath.Join(root, "gone"), "x")
	r.waitEvent("gone", Create)
	r.reset()
	own(t, w, func() error { return os.Remove(filepath.Join(root, "gone")) }, "gone")

	w.own.mu.Lock()
	w.own.lastPrune = time.Time{}
	w.own.mu.Unlock()
	w.pruneOwn()
	w.own.mu.Lock()
	var kept []string
	for rel := range w.own.paths {
		kept = append(kept, rel)
	}
	ids := len(w.own.ids)
	bytes, recount := w.own.bytes, w.own.recount()
	w.own.mu.Unlock()
	if len(kept) != 1 || kept[0] != "gone" {
		t.Errorf("name records kept after the prune: %v, want only the removed name's", kept)
	}
	if ids < 20 {
		t.Errorf("%d identity records kept, want the 20 files'", ids)
	}
	if bytes != recount {
		t.Errorf("the tables' size is counted as %d bytes, recounted %d", bytes, recount)
	}
	barrier(t, r, root, "barrier")
	r.noneBut("barrier")
}

// TestOwnRecordsBounded: own changes of long names made faster than their
// TTL lets them go keep the tables within their bound, by dropping records
// before the TTL (counted), never one an own change is using, and names
// before identities; the size counted is the size held.
func TestOwnRecordsBounded(t *testing.T) {
	root := t.TempDir()
	w := start(t, newRec(t).config(root))
	kept := filepath.Join(root, "kept")
	own(t, w, func() error { return os.WriteFile(kept, []byte("own\n"), 0o644) }, "kept")
	var st syscall.Stat_t
	if err := syscall.Lstat(kept, &st); err != nil {
		t.Fatal(err)
	}
	endHeld := w.Begin("held")
	// Names of 3,600 bytes under a directory that does not exist: each
	// record is kept as a removed name's, for ownTTL.
	long := strings.Repeat(strings.Repeat("d", 240)+"/", 15)
	limit := int64(2*ownMaxBytes + ownMaxBytes/4 + len(long) + 2*pathCost)
	n := int(3*ownMaxBytes/len(long)) + 1
	var peak int64
	for i := 0; i < n; i++ {
		own(t, w, func() error { return nil }, filepath.Join("nowhere", long, strconv.Itoa(i)))
		w.own.mu.Lock()
		peak = max(peak, w.own.bytes)
		w.own.mu.Unlock()
	}
	w.own.mu.Lock()
	_, held := w.own.paths["held"]
	_, idKept := w.own.ids[idOf(&st)]
	bytes, recount, dropped := w.own.bytes, w.own.recount(), w.own.dropped
	w.own.mu.Unlock()
	endHeld()
	if peak > limit {
		t.Errorf("the own records reached %d bytes, past their bound of %d", peak, limit)
	}
	if !held {
		t.Error("the record of an own change in flight was dropped")
	}
	if !idKept {
		t.Error("an identity's record was dropped while dropping names was enough")
	}
	if dropped == 0 {
		t.Error("no record counted as dropped before its TTL")
	}
	if bytes != recount {
		t.Errorf("the tables' size is counted as %d bytes, recounted %d", bytes, recount)
	}
	if st := w.Stats(); st.OwnDropped != dropped || st.OwnBytes <= 0 {
		t.Errorf("stats: %d bytes, %d dropped; want >0 and %d", st.OwnBytes, st.OwnDropped, dropped)
	}
}
