// Package procfs reads /proc for the daemon's other rooms: bounded reads of
// a caller's /proc files (docs/DESIGN.md#no-wait-on-caller), the cgroup v2
// hierarchy's mount point, and the octal escapes of the kernel's mount
// tables. It decides nothing: guard, tasks and fusefs interpret what it
// reads (docs/DESIGN.md#proc-room).
package procfs
