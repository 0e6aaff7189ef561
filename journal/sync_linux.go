package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data (and the size it needs) durable.
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
