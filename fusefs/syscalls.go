package fusefs

import "github.com/rubinofs/rubinofs/internal/syscallcompat"

// The backing syscalls that need no node state live in
// internal/syscallcompat (docs/DESIGN.md#syscall-room); these names keep
// the adapter's call sites short.

type dirFd = syscallcompat.Dir

var (
	openRoot        = syscallcompat.OpenRoot
	openDirBeneath  = syscallcompat.OpenDirBeneath
	statAt          = syscallcompat.StatAt
	procPath        = syscallcompat.ProcPath
	openForHashIn   = syscallcompat.OpenForHashIn
	getxattrAt      = syscallcompat.GetxattrAt
	listxattrAt     = syscallcompat.ListxattrAt
	setxattrLeaf    = syscallcompat.SetxattrLeaf
	removexattrLeaf = syscallcompat.RemovexattrLeaf
	chmodAt         = syscallcompat.ChmodAt
	truncateAt      = syscallcompat.TruncateAt
	killPrivFd      = syscallcompat.KillPrivFd
	entryGid        = syscallcompat.EntryGid
	touchCtimeAt    = syscallcompat.TouchCtimeAt
	onlyCtime       = syscallcompat.OnlyCtime
	withUmask       = syscallcompat.WithUmask
	setattrTimes    = syscallcompat.SetattrTimes
	setattrOwner    = syscallcompat.SetattrOwner
	setattrFd       = syscallcompat.SetattrFd
	preserveOwner   = syscallcompat.PreserveOwner
	openForHash     = syscallcompat.OpenForHash
	markPageIn      = syscallcompat.MarkPageIn
	copiedRead      = syscallcompat.CopiedRead
	isPageIn        = syscallcompat.IsPageIn
)
