package fusefs

import (
	"sync"

	"golang.org/x/sys/unix"
)

// lateCloseQueue bounds the descriptors waiting for lateCloser's
// goroutine; past it a descriptor is closed in the request, as before.
const lateCloseQueue = 256

// lateCloser closes, on its own goroutine after the request's reply, the
// O_PATH descriptors that pin a removed or replaced file until the guard
// has been told (pinIn). Their close is often the file's last reference:
// the kernel then frees the inode and its blocks in close(2) (ext4's
// truncate, and with the discard mount option a synchronous discard of
// every extent), which a removal through the mount would otherwise wait
// for: a third of a guarded UNLINK's daemon time in `git checkout -- .`
// on this machine (docs/DESIGN.md#late-unpin). A pin held a little longer
// only delays the reuse of its inode number, which is what it is for.
// The zero value is ready; safe for concurrent use. close waits for the
// queue to drain (FS.Close, once no request runs).
type lateCloser struct {
	mu      sync.RWMutex
	started bool
	closed  bool
	ch      chan int
	done    chan struct{}
}

// closeLater hands fd to the goroutine (started at the first call), or
// closes it at once when the queue is full or the closer closed.
func (c *lateCloser) closeLater(fd int) {
	c.mu.RLock()
	if c.started && !c.closed {
		select {
		case c.ch <- fd:
			c.mu.RUnlock()
			return
		default:
		}
	}
	started, closed := c.started, c.closed
	c.mu.RUnlock()
	if !started && !closed && c.start() {
		c.closeLater(fd)
		return
	}
	unix.Close(fd)
}

// start starts the goroutine once; false when the closer is closed.
func (c *lateCloser) start() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if !c.started {
		c.started = true
		c.ch, c.done = make(chan int, lateCloseQueue), make(chan struct{})
		go func() {
			defer close(c.done)
			for fd := range c.ch {
				unix.Close(fd)
			}
		}()
	}
	return true
}

// close closes every queued descriptor and stops the goroutine; later
// descriptors are closed at once. Idempotent.
func (c *lateCloser) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	started := c.started
	if started {
		close(c.ch)
	}
	c.mu.Unlock()
	if started {
		<-c.done
	}
}
