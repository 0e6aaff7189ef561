package main

import (
	"os"
	"runtime/debug"
)

// daemonMemoryLimit is the Go runtime's soft memory limit for a mount's
// daemon, in bytes, unless GOMEMLIMIT sets one (docs/DESIGN.md#memory-limit).
const daemonMemoryLimit = 256 << 20

// setMemoryLimit gives the daemon process the soft limit
// daemonMemoryLimit: the garbage collector then works harder as the heap
// nears it instead of letting garbage grow to twice the live heap (the
// default GOGC=100). It is a soft limit: a live heap above it is kept,
// never refused. GOMEMLIMIT in the environment (the runtime's own
// setting, "off" included) wins.
func setMemoryLimit() {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return
	}
	debug.SetMemoryLimit(daemonMemoryLimit)
}
