package compact

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/ctltree"
)

// The control files, driven through their ctltree handlers exactly as
// fusefs drives them (the real-mount test in tests/ goes through the
// kernel).

var caller = ctltree.Caller{Pid: 1, Session: "default", Privileged: true}

func walk(t *testing.T, root *ctltree.Dir, path string) ctltree.Node {
	t.Helper()
	var cur ctltree.Node = root
	for _, name := range strings.Split(path, "/") {
		d, ok := cur.(*ctltree.Dir)
		if !ok {
			t.Fatalf("%s: %s is not a directory", path, name)
		}
		if cur = d.Child(caller, name); cur == nil {
			return nil
		}
	}
	return cur
}

func file(t *testing.T, root *ctltree.Dir, path string) *ctltree.File {
	t.Helper()
	f, ok := walk(t, root, path).(*ctltree.File)
	if !ok {
		t.Fatalf("%s is not a file", path)
	}
	return f
}

func read(t *testing.T, root *ctltree.Dir, path string) string {
	t.Helper()
	f := file(t, root, path)
	if f.Read == nil {
		return ""
	}
	b, err := f.Read(context.Background(), caller)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

func errnoIs(t *testing.T, err error, want syscall.Errno, reason string) {
	t.Helper()
	if got := ctltree.ErrnoOf(err); got != want || !strings.Contains(err.Error(), reason) {
		t.Fatalf("error %v (%v), want %v with %q", err, got, want, reason)
	}
}

func newTestService(t *testing.T, cfg Config, opts ...Option) (*Service, *ctltree.Dir) {
	c := newTestCompressor(t, cfg, opts...)
	s := NewService(c, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.Close() })
	return s, s.Node()
}

func TestControlFiles(t *testing.T) {
	_, root := newTestService(t, smallConfig())
	if !strings.Contains(read(t, root, "README"), "sessions/ID/") {
		t.Fatal("README")
	}
	newFile := file(t, root, "new")
	if newFile.Kind != ctltree.Clone {
		t.Fatal("new is not a clone file")
	}
	_, err := newFile.Clone(caller, []byte(`{"model":"gpt-4o","context_window":7}`+"\n"))
	errnoIs(t, err, syscall.EINVAL, "context_window 7 out of range")
	_, err = newFile.Clone(caller, []byte(`{"modle":"x"}`))
	errnoIs(t, err, syscall.EINVAL, "unknown field")
	id, err := newFile.Clone(caller, []byte("\n"))
	if err != nil || len(id) != IDLen {
		t.Fatalf("new: %q, %v", id, err)
	}
	id2, err := newFile.Clone(caller, []byte(`{"model":"gpt-4o","context_window":4000}`))
	if err != nil {
		t.Fatal(err)
	}
	if full, err := file(t, root, "resolve").Clone(caller, []byte(id[:6]+"\n")); err != nil || full != id {
		t.Fatalf("resolve: %q, %v", full, err)
	}
	_, err = file(t, root, "resolve").Clone(caller, []byte("ffffffff"))
	errnoIs(t, err, syscall.ENOENT, "no such session")
	_, err = file(t, root, "resolve").Clone(caller, []byte("../etc"))
	errnoIs(t, err, syscall.EINVAL, "malformed session id")
	if names := walk(t, root, "sessions").(*ctltree.Dir).Names(caller); len(names) != 2 || names[0] != id || names[1] != id2 {
		t.Fatalf("sessions/ lists %v", names)
	}
	if walk(t, root, "sessions/ffffffff") != nil || walk(t, root, "sessions/..") != nil {
		t.Fatal("an unknown session resolved")
	}
	var st Status
	if err := json.Unmarshal([]byte(read(t, root, "sessions/"+id2[:8]+"/status")), &st); err != nil {
		t.Fatal(err)
	}
	if st.SessionID != id2 || st.ContextWindow != 4000 || st.ThresholdTokens != 2000 || st.Tokenizer != TokenizerO200K || st.Messages != 0 {
		t.Fatalf("status %+v", st)
	}

	msgs := file(t, root, "sessions/"+id+"/messages")
	if msgs.Kind != ctltree.Append {
		t.Fatal("messages is not an append file")
	}
	conv := jsonl(t, genConversation(rand.New(rand.NewPCG(30, 30)), 60))
	// A malformed line in a batch: EINVAL naming the line, nothing stored.
	bad := append(append([]byte{}, conv[:200+strings.Index(string(conv[200:]), "\n")+1]...), "{\"role\":\"user\",\"content\":\"x\"\n"...)
	err = msgs.Append(caller, bad)
	errnoIs(t, err, syscall.EINVAL, "line "+strconv.Itoa(strings.Count(string(bad), "\n")))
	if got := read(t, root, "sessions/"+id+"/messages"); got != "" {
		t.Fatalf("a refused batch left %q", got)
	}
	if err := msgs.Append(caller, conv); err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, "sessions/"+id+"/messages"); got != string(conv) {
		t.Fatalf("the transcript reads back differently:\n%.300s\nwant\n%.300s", got, conv)
	}
	json.Unmarshal([]byte(read(t, root, "sessions/"+id+"/status")), &st)
	if !st.NeedsCompaction || st.Messages < 60 || st.Thrashing {
		t.Fatalf("status after feeding: %+v", st)
	}

	ctl := file(t, root, "sessions/"+id+"/ctl")
	errnoIs(t, ctl.Write(caller, []byte("explode")), syscall.EINVAL, "unknown command")
	if read(t, root, "sessions/"+id+"/result") != "" {
		t.Fatal("a result before any compaction")
	}
	if err := ctl.Write(caller, []byte("compact")); err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal([]byte(read(t, root, "sessions/"+id+"/result")), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Compacted || res.SourceSessionID != id || res.TargetSessionID == "" || res.SavedTokens <= 0 {
		t.Fatalf("result %+v", res)
	}
	sum := read(t, root, "sessions/"+id+"/summary")
	if !strings.Contains(sum, "## Goal") || sum != read(t, root, "sessions/"+res.TargetSessionID+"/summary") {
		t.Fatalf("summary:\n%s", sum)
	}
	lin := strings.Split(strings.TrimSpace(read(t, root, "sessions/"+res.TargetSessionID+"/lineage")), "\n")
	if len(lin) != 2 || !strings.Contains(lin[0], `"relation":"ancestor"`) || !strings.Contains(lin[1], res.SummaryID) {
		t.Fatalf("lineage:\n%s", strings.Join(lin, "\n"))
	}
	list := read(t, root, "list")
	if strings.Count(list, "\n") != 3 || !strings.Contains(list, `"children":["`+res.TargetSessionID) {
		t.Fatalf("list:\n%s", list)
	}
	if !strings.Contains(read(t, root, "config"), `"context_window": 2000`) {
		t.Fatal("config")
	}

	// Below the threshold: a no-op result, no new session.
	short := file(t, root, "sessions/"+id2+"/messages")
	if err := short.Append(caller, jsonl(t, []Message{user("hi"), assistant("hello")})); err != nil {
		t.Fatal(err)
	}
	if err := file(t, root, "sessions/"+id2+"/ctl").Write(caller, []byte("force")); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(read(t, root, "sessions/"+id2+"/result")), &res)
	if res.Compacted || res.Reason != ReasonTooFewMessages || !res.Forced {
		t.Fatalf("no-op result %+v", res)
	}
	if n := len(walk(t, root, "sessions").(*ctltree.Dir).Names(caller)); n != 3 {
		t.Fatalf("%d sessions after a no-op, want 3", n)
	}
}

func TestControlFilesSummarizerFailure(t *testing.T) {
	_, root := newTestService(t, smallConfig(), WithSummarizer(failingSummarizer{}))
	id, err := file(t, root, "new").Clone(caller, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := file(t, root, "sessions/"+id+"/messages").Append(caller, jsonl(t, genConversation(rand.New(rand.NewPCG(31, 31)), 60))); err != nil {
		t.Fatal(err)
	}
	before := read(t, root, "list")
	err = file(t, root, "sessions/"+id+"/ctl").Write(caller, []byte("force"))
	errnoIs(t, err, syscall.EIO, "model unavailable")
	var res Result
	json.Unmarshal([]byte(read(t, root, "sessions/"+id+"/result")), &res)
	if res.Compacted || !strings.Contains(res.Error, "model unavailable") {
		t.Fatalf("result %+v", res)
	}
	if read(t, root, "list") != before || read(t, root, "sessions/"+id+"/summary") != "" {
		t.Fatal("a failed compaction changed the store")
	}
}

func TestCtlErrnos(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want syscall.Errno
	}{
		{ErrNotFound, syscall.ENOENT},
		{ErrAmbiguous, syscall.EINVAL},
		{ErrBadID, syscall.EINVAL},
		{ErrLimit, syscall.EFBIG},
		{ErrSummarizerTimeout, syscall.ETIMEDOUT},
		{context.Canceled, syscall.EINTR},
		{errors.New("disk on fire"), syscall.EIO},
	} {
		if got := ctltree.ErrnoOf(ctlErrnos.Map(tc.err)); got != tc.want {
			t.Errorf("%v -> %v, want %v", tc.err, got, tc.want)
		}
	}
}
