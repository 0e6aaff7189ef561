package benchkit

import "github.com/rubinofs/rubinofs/internal/mounttest"

// KernelURing turns the fuse module's enable_uring on for the rest of the
// run and back to what it was at teardown (AtExit), so that the mounts
// that ask for io_uring (rubinofs --io-uring, the loopbacks' -io-uring)
// get it (mounttest.KernelURing).
func KernelURing() error { return mounttest.KernelURing(AtExit) }
