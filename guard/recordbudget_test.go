package guard

import (
	"testing"
	"time"
)

// TestRecordBudgetPerUID: the sessions of one uid hold at most
// MaxRecordsPerUID records together (counted again once a second of the
// guard's clock, which the test moves before each read): uid 7's second
// session stops registering new reads at the bound, a read again of a
// file it has a record of is still registered, a harness's declaration
// makes no record past it either, uid 8's session is not
// touched, the refusals are counted, and a dropped session frees its
// records.
func TestRecordBudgetPerUID(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	g := New(Config{MaxRecordsPerUID: 50, Now: func() time.Time { return now }})
	owners := map[string]uint32{"a": 7, "b": 7, "c": 8}
	g.SetSessionOwners(func(s string) (uint32, bool) { u, ok := owners[s]; return u, ok })
	files := make([]*file, 80)
	for i := range files {
		files[i] = newFile(t, "x")
	}
	read := func(session string, f *file) {
		t.Helper()
		now = now.Add(recordSweepEvery)
		must(t, g.NoteReadBy(Caller{Session: session}, f.target()))
	}
	for _, f := range files[:30] {
		read("a", f)
	}
	for _, f := range files[30:80] {
		read("b", f)
	}
	if a, b := g.RecordCount("a"), g.RecordCount("b"); a != 30 || b != 20 {
		t.Fatalf("uid 7's sessions hold %d and %d records, want 30 and 20 (a bound of 50)", a, b)
	}
	if n := g.Counts().RecordsRefused; n != 30 {
		t.Fatalf("records_refused = %d, want 30", n)
	}
	now = now.Add(recordSweepEvery)
	must(t, g.DeclareRead("b", files[78].target(), Hash{}, false)) // a harness's declaration, past the bound
	if b := g.RecordCount("b"); b != 20 {
		t.Fatalf("a declaration past the bound made a record: b holds %d", b)
	}
	read("b", files[30]) // b has it: registered again
	if d := g.Decide("b", OpWrite, files[30].target()); !d.Allow {
		t.Fatalf("b's write of a file it read: %+v", d)
	}
	if d := g.Decide("b", OpWrite, files[79].target()); d.Allow {
		t.Fatal("b's write of a file whose read was past the bound was allowed")
	}
	for _, f := range files {
		read("c", f)
	}
	if c := g.RecordCount("c"); c != 50 {
		t.Fatalf("uid 8's session holds %d records, want 50", c)
	}
	g.DropSession("a")
	read("b", files[79])
	if b := g.RecordCount("b"); b != 21 {
		t.Fatalf("after a's end, b holds %d records, want 21", b)
	}
}

// TestRecordBudgetGatesOwnChanges: the files a session creates and writes
// count in its uid's record budget like the ones it reads. Past the bound
// a create still happens (NoteCreate returns its sequence) but makes no
// record, so a later by-path change of that file is refused as unread; a
// write of a file the session already has a record of is credited.
func TestRecordBudgetGatesOwnChanges(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	g := New(Config{MaxRecordsPerUID: 5, Now: func() time.Time { return now }})
	g.SetSessionOwners(func(s string) (uint32, bool) { return 7, s == "a" })
	files := make([]*file, 10)
	for i := range files {
		files[i] = newFile(t, "")
		now = now.Add(recordSweepEvery)
		if seq := g.NoteCreate("a", files[i].target()); seq == 0 {
			t.Fatalf("create %d got no mutation sequence", i)
		}
	}
	if n := g.RecordCount("a"); n != 5 {
		t.Fatalf("uid 7's session holds %d records after 10 creates, want 5 (its bound)", n)
	}
	if d := g.Decide("a", OpTruncate, files[4].target()); !d.Allow {
		t.Fatalf("a truncate of a file created under the bound: %+v", d)
	}
	if d := g.Decide("a", OpTruncate, files[7].target()); d.Allow {
		t.Fatal("a truncate of a file created past the bound was allowed")
	}
	// Written through a handle: the record of a file made under the bound
	// follows the new content; one made past it gets none.
	files[2].write("new bytes")
	files[8].write("new bytes")
	now = now.Add(recordSweepEvery)
	must(t, g.NoteWrite("a", files[2].target()))
	must(t, g.NoteWrite("a", files[8].target()))
	if d := g.Decide("a", OpTruncate, files[2].target()); !d.Allow {
		t.Fatalf("a truncate of a file written under the bound: %+v", d)
	}
	if d := g.Decide("a", OpTruncate, files[8].target()); d.Allow {
		t.Fatal("a write past the bound made a record")
	}
	if n := g.RecordCount("a"); n != 5 {
		t.Fatalf("uid 7's session holds %d records, want 5", n)
	}
}
