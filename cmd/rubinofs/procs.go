package main

import "runtime"

// spareProc gives the Go scheduler one P (GOMAXPROCS) more than go-fuse's
// /dev/fuse readers of the daemon's one mount, once its server is made
// (docs/DESIGN.md#spare-proc). A process-wide setting, so the daemon
// command makes it, not package daemon, which tests and benchmarks run
// many mounts in one process with. go-fuse starts at most GOMAXPROCS
// readers (2 at least), each blocked in read(2) of /dev/fuse while the
// file system is idle; with every P held by a reader in a system call
// and none idle, the runtime's monitor takes the Ps back from them at its
// next tick (20 µs) and hands them to other threads, and each request
// then wakes a thread more. With one P to spare, an idle P exists while
// the readers wait, and the monitor leaves them be.
func spareProc() { runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1) }
