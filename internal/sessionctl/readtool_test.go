package sessionctl

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"testing"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard"
)

// TestParseReadToolRequest: the readtool grammar (docs/DESIGN.md#read-tool),
// its quoted paths and every refusal with its errno.
func TestParseReadToolRequest(t *testing.T) {
	h := "0123456789abcdef0123456789abcdef"
	hash, _ := guard.ParseHash(h)
	good := map[string]readToolReq{
		"window f 0 0":                  {Verb: "window", Path: "f", First: 0, Count: 0},
		"window f 3 10 " + h + "\n":     {Verb: "window", Path: "f", First: 3, Count: 10, Hash: hash},
		"window \"a b\"\t1 1":           {Verb: "window", Path: "a b", First: 1, Count: 1},
		"skeleton f -":                  {Verb: "skeleton", Path: "f"},
		"skeleton f 2:3,10:1 " + h:      {Verb: "skeleton", Path: "f", Ranges: []guard.Range{{First: 2, Count: 3}, {First: 10, Count: 1}}, Hash: hash},
		"skeleton `x\ty` 5:5":           {Verb: "skeleton", Path: "x\ty", Ranges: []guard.Range{{First: 5, Count: 5}}},
		"  window  f   1   2  ":         {Verb: "window", Path: "f", First: 1, Count: 2},
		"window \"q\\\"uote\" 0 0 " + h: {Verb: "window", Path: "q\"uote", Hash: hash},
	}
	for in, want := range good {
		got, err := parseReadToolRequest([]byte(in))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %+v %v, want %+v", in, got, err, want)
		}
	}
	bad := map[string]syscall.Errno{
		"":                         syscall.EINVAL,
		"read f":                   syscall.EINVAL,
		"window f":                 syscall.EINVAL,
		"window f 1":               syscall.EINVAL,
		"window f 0 5":             syscall.EINVAL,
		"window f 5 0":             syscall.EINVAL,
		"window f -1 2":            syscall.EINVAL,
		"window f x 2":             syscall.EINVAL,
		"window f 1 1 nothash":     syscall.EINVAL,
		"window f 1 1 " + h + " x": syscall.EINVAL,
		"window \"f 1 1":           syscall.EINVAL,
		"window \"f\"x 1 1":        syscall.EINVAL,
		"window \"\" 1 1":          syscall.EINVAL,
		"skeleton f":               syscall.EINVAL,
		"skeleton f 3:2,4:1":       syscall.EINVAL, // overlapping
		"skeleton f 5:1,2:1":       syscall.EINVAL, // descending
		"skeleton f 0:3":           syscall.EINVAL,
		"skeleton f 3:0":           syscall.EINVAL,
		"skeleton f 3":             syscall.EINVAL,
		"window f\x00 1 1":         syscall.EINVAL,
		"window \xff 1 1":          syscall.EINVAL,
	}
	big := make([]byte, maxReadToolRequest+1)
	for i := range big {
		big[i] = 'a'
	}
	bad[string(big)] = syscall.EFBIG
	many := "skeleton f 1:1"
	for i := 1; i <= MaxSkeletonRanges; i++ {
		many += "," + strconv.Itoa(2*i+1) + ":1"
	}
	bad[many] = syscall.EINVAL
	for in, want := range bad {
		_, err := parseReadToolRequest([]byte(in))
		var ce *ctltree.Error
		if !errors.As(err, &ce) || ce.Errno != want || ce.Msg == "" {
			t.Errorf("%.60q: got %v, want %v with a reason", in, err, want)
		}
	}
}

// TestAnswerReadTool: window answers follow the tracker (new, dup, new
// after the content changed, new once after an edit failure), a whole
// window declares the read and is still a duplicate the second time, a
// window overlapping a skeleton's elided range is a drill-in every time,
// and another session's windows are its own.
func TestAnswerReadTool(t *testing.T) {
	g := guard.New(guard.Config{Mode: guard.ModeEnforce})
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("a\n\tb\n\tc\n\td\ne\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	tg := guard.Target{Path: "f", Stat: guard.StatOf(&st), Open: func() (*os.File, error) { return os.Open(p) }}
	h1, h2 := guard.HashBytes([]byte("one")), guard.HashBytes([]byte("two"))
	ask := func(session string, req readToolReq, h guard.Hash, want string) {
		t.Helper()
		got, err := answerReadTool(g, session, tg, req, h)
		if err != nil || got != want {
			t.Fatalf("%s %+v: got %q %v, want %q", session, req, got, err, want)
		}
	}
	win := readToolReq{Verb: "window", First: 2, Count: 2}
	ask("a", win, h1, "new")
	ask("a", win, h1, "dup")
	ask("b", win, h1, "new")
	ask("a", win, h2, "new")
	ask("a", win, h2, "dup")
	g.DeclareEditFailed("a", tg.Stat.ID)
	ask("a", win, h2, "new")
	ask("a", win, h2, "dup")

	whole := readToolReq{Verb: "window"}
	ask("a", whole, h1, "new")
	if !g.ForSession("a").Seen(tg.Stat.ID) {
		t.Fatal("a whole-file window declared no read")
	}
	ask("a", whole, h1, "dup")
	if g.ForSession("c").Seen(tg.Stat.ID) {
		t.Fatal("session c has a record it never made")
	}

	sk := readToolReq{Verb: "skeleton", Ranges: []guard.Range{{First: 3, Count: 2}}}
	ask("a", sk, h1, "new")
	ask("a", sk, h1, "dup")
	in := readToolReq{Verb: "window", First: 4, Count: 1}
	ask("a", in, h1, "drill")
	ask("a", in, h1, "drill")
	out := readToolReq{Verb: "window", First: 1, Count: 2}
	ask("a", out, h1, "new")
	ask("a", out, h1, "dup")
	ask("b", in, h1, "new") // b's skeletons are its own: none
	ask("b", in, h1, "dup")
}
