package benchkit

import (
	"bytes"
	"fmt"
	"log"
	"os"
)

// EnableURingParam is the fuse module's switch for FUSE over io_uring
// (Linux 6.14 and later; docs/DESIGN.md#fuse-io-uring).
const EnableURingParam = "/sys/module/fuse/parameters/enable_uring"

// KernelURing turns the fuse module's enable_uring on for the rest of the
// run and back to what it was at teardown (AtExit), so that the mounts
// that ask for io_uring (rubinofs --io-uring, the loopbacks' -io-uring)
// get it. It fails on a kernel without it, and as a user other than root.
func KernelURing() error {
	old, err := os.ReadFile(EnableURingParam)
	if err != nil {
		return fmt.Errorf("FUSE over io_uring: %w (Linux 6.14 or later)", err)
	}
	if err := os.WriteFile(EnableURingParam, []byte("Y"), 0); err != nil {
		return fmt.Errorf("switching FUSE over io_uring on: %w", err)
	}
	AtExit(func() {
		if err := os.WriteFile(EnableURingParam, bytes.TrimSpace(old), 0); err != nil {
			log.Printf("restoring %s: %v", EnableURingParam, err)
		}
	})
	return nil
}
