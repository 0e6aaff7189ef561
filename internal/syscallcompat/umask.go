package syscallcompat

// The caller's umask by in-flight request, applied by the daemon unless
// the backing directory has a default POSIX ACL (docs/DESIGN.md#posix-acl).

import "sync"

// requestUmasks maps an in-flight request's cancel channel to its umask.
var requestUmasks sync.Map // <-chan struct{} -> uint32

// WithUmask records umask for the request whose cancel channel is cancel
// and returns the function that forgets it (deferred by rawHooks).
func WithUmask(cancel <-chan struct{}, umask uint32) func() {
	requestUmasks.Store(cancel, umask)
	return func() { requestUmasks.Delete(cancel) }
}

// HasDefaultACL reports whether the directory d has a default POSIX ACL
// (system.posix_acl_default exists and is not empty).
func HasDefaultACL(d Dir) bool {
	n, err := GetxattrAt(d, ".", "system.posix_acl_default", nil)
	return err == nil && n > 0
}

// UmaskOf returns the umask WithUmask recorded for the in-flight request
// whose cancel channel is cancel; ok is false for none. Safe for
// concurrent use.
func UmaskOf(cancel <-chan struct{}) (umask uint32, ok bool) {
	v, ok := requestUmasks.Load(cancel)
	if !ok {
		return 0, false
	}
	return v.(uint32), true
}
