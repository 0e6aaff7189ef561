package fusefs

// Access checks as the caller (docs/DESIGN.md#as-caller) are
// internal/ascaller's; the mount gives them its walk below the workspace
// root (journalMount.OpenParent). These names serve the control files
// that still live here.

import (
	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/internal/ascaller"
)

// creds are the credentials an access is checked with (ascaller.Creds).
type creds = ascaller.Creds

// credsOf is ascaller.Of: c's fs ids and its supplementary groups, read
// within procfs.Bound (docs/DESIGN.md#no-wait-on-caller).
func credsOf(c ctltree.Caller) creds { return ascaller.Of(c) }

// accessAs checks, as cr, access mode to the workspace-relative path rel
// without following a final symlink (ascaller.Access). Errors: the
// kernel's errno, or ascaller.ErrNotAsCaller.
func accessAs(f *FS, cr creds, rel string, mode uint32) error {
	return ascaller.Access(journalMount{f}, cr, rel, mode)
}

// accessAll is accessAs for each of rels in one thread switch
// (ascaller.AccessAll).
func accessAll(f *FS, cr creds, rels []string, mode uint32, res func(i int, err error)) {
	ascaller.AccessAll(journalMount{f}, cr, rels, mode, res)
}

// denyReason is ascaller.DenyReason: the *ctltree.Error of a failed
// as-caller check (EACCES for a refusal), with its one-line reason.
func denyReason(cr creds, what, rel string, err error) *ctltree.Error {
	return ascaller.DenyReason(cr, what, rel, err)
}
