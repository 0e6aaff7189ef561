package mounttest

import (
	"bytes"
	"fmt"
	"log"
	"os"

	"github.com/rubinofs/rubinofs/daemon"
)

// KernelURing turns the fuse module's enable_uring
// (daemon.EnableURingParam) on, and registers with cleanup the function
// that sets it back to what it was (t.Cleanup, benchkit.AtExit): mounts
// that ask for FUSE over io_uring then get it (docs/DESIGN.md#fuse-io-uring).
// On a kernel without it the error wraps os.ErrNotExist; as a user other
// than root the write fails.
func KernelURing(cleanup func(func())) error {
	old, err := os.ReadFile(daemon.EnableURingParam)
	if err != nil {
		return fmt.Errorf("FUSE over io_uring (Linux 6.14 or later): %w", err)
	}
	if err := os.WriteFile(daemon.EnableURingParam, []byte("Y"), 0); err != nil {
		return fmt.Errorf("switching FUSE over io_uring on: %w", err)
	}
	cleanup(func() {
		if err := os.WriteFile(daemon.EnableURingParam, bytes.TrimSpace(old), 0); err != nil {
			log.Printf("restoring %s: %v", daemon.EnableURingParam, err)
		}
	})
	return nil
}
