package observe

import (
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// rawPassThrough are the fuse.RawFileSystem methods rawWrap leaves to the
// embedded bridge on purpose, with the reason: none of them is a request
// of a caller, so there is nothing to time, count or log.
var rawPassThrough = map[string]string{
	"String":   "the file system's name, for debug output",
	"SetDebug": "a setting of the server",
	"Init":     "the server hands itself to the bridge at the first request (FUSE_INIT is answered by go-fuse itself)",
}

// TestRawWrapCoversEveryOp checks that rawWrap declares its own method
// (rawwrap.go) for every method of fuse.RawFileSystem but rawPassThrough:
// an op whose wrapper is missing would silently reach the bridge through
// the embedded interface, with no metrics and no access-log line. A
// promoted method is a compiler-generated wrapper, whose code has no
// position in rawwrap.go.
func TestRawWrapCoversEveryOp(t *testing.T) {
	iface := reflect.TypeOf((*fuse.RawFileSystem)(nil)).Elem()
	impl := reflect.TypeOf((*rawWrap)(nil))
	for i := 0; i < iface.NumMethod(); i++ {
		name := iface.Method(i).Name
		m, ok := impl.MethodByName(name)
		if !ok {
			t.Errorf("rawWrap has no method %s", name)
			continue
		}
		file, _ := runtime.FuncForPC(m.Func.Pointer()).FileLine(m.Func.Pointer())
		declared := filepath.Base(file) == "rawwrap.go"
		if _, pass := rawPassThrough[name]; pass {
			if declared {
				t.Errorf("rawWrap.%s is declared in rawwrap.go: drop it from rawPassThrough", name)
			}
			continue
		}
		if !declared {
			t.Errorf("rawWrap.%s is not declared in rawwrap.go (it comes from %s): the op gets no metrics and no access-log line; add a wrapper", name, file)
		}
	}
	for name := range rawPassThrough {
		if _, ok := iface.MethodByName(name); !ok {
			t.Errorf("rawPassThrough names %s, which fuse.RawFileSystem no longer has", name)
		}
	}
}
