package daemon

import (
	"runtime"
	"sync"
)

// spareProcOnce makes spareProc act once per process.
var spareProcOnce sync.Once

// spareProc gives the Go scheduler one P (GOMAXPROCS) more than go-fuse's
// /dev/fuse readers, once per process, after the first mount's server is
// made (docs/DESIGN.md#spare-proc). go-fuse starts at most GOMAXPROCS
// readers (2 at least), each blocked in read(2) of /dev/fuse while the
// file system is idle; with every P held by a reader in a system call
// and none idle, the runtime's monitor takes the Ps back from them at its
// next tick (20 µs) and hands them to other threads, and each request
// then wakes a thread more. With one P to spare, an idle P exists while
// the readers wait, and the monitor leaves them be. A later mount in the
// same process (tests) starts as many readers as there are Ps then.
func spareProc() {
	spareProcOnce.Do(func() { runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1) })
}
