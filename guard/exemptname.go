package guard

// No change through the mount gives what the guard covers a name the
// guard does not cover (docs/DESIGN.md#exempt-widening).

import (
	"fmt"
	"syscall"
	"time"
)

// RefuseExemptName refuses op on path, a guarded file (OpLinkExempt) or a
// directory the guard covers (OpMoveExempt), which the change would give
// the exempt name to: a hard link there would let any write through that
// name change the guarded file unguarded and unjournaled, and a directory
// (or either side of an exchange) moved there would take every guarded
// file below it out of the guard. The refusal is recorded (CodeExemptName) and the errno is
// EXDEV, as between two file systems: mv(1) then moves a directory's
// files one by one, each a rename decided as an overwrite of the file
// (OpMoveExempt), and ln(1) fails. In ModeWarn it is recorded as a
// warning and 0 is returned; in ModeOff nothing is recorded and 0 is
// returned. path == to names a link of an open file by its descriptor,
// whose other names are not known. The caller has found that the guard
// decides for who.Caller (the mount's guarded callers). Safe for
// concurrent use.
func (g *Guard) RefuseExemptName(who Asker, op Op, path, to string) syscall.Errno {
	if g.mode == ModeOff {
		return 0
	}
	msg := fmt.Sprintf("refusing to %s %s: %s is exempt from the guard and the journal, so writes through it would change %s unguarded and unjournaled; copy it instead (cp)", op.verb(), path, to, path)
	if path == to {
		msg = fmt.Sprintf("refusing to link an open file that has other names at the exempt name %s: %s is exempt from the guard and the journal, so writes through it would change the file under its other names unguarded and unjournaled; copy it instead (cp)", to, to)
	}
	if op == OpMoveExempt {
		msg = fmt.Sprintf("refusing to %s %s: %s is exempt from the guard and the journal, so the files below it would change unguarded; read them first and move them one by one (mv does after this refusal), or copy them (cp -r)", op.verb(), path, to)
	}
	return g.refuseName(who, op, path, msg)
}

// RefuseToolTree is RefuseExemptName for a change that would give
// guarded content a tool-owned tree's exemption (docs/DESIGN.md#tool-trees,
// "Renames and links"): a directory holding guarded files given a
// directory marker's name (node_modules) or moved below a marker it is
// not below, or a guarded file hard-linked where a marker would free it
// (path == to: an open file linked by its descriptor). The journal still
// records what changes in a tool tree; what is lost is the refusal of a
// blind overwrite. Recorded with CodeExemptName; EXDEV, 0 in ModeWarn
// (recorded) and ModeOff (not). Safe for concurrent use.
func (g *Guard) RefuseToolTree(who Asker, op Op, path, to string) syscall.Errno {
	if g.mode == ModeOff {
		return 0
	}
	msg := fmt.Sprintf("refusing to link %s at %s: there it would be a tool-owned tree's marker or lie in one (node_modules, a venv, a tagged cache), where the guard refuses no overwrite; copy it instead (cp)", path, to)
	if path == to {
		msg = fmt.Sprintf("refusing to link an open file that has other names at %s: there it would be a tool-owned tree's marker or lie in one (node_modules, a venv, a tagged cache), where the guard refuses no overwrite; copy it instead (cp)", to)
	}
	if op == OpMoveExempt {
		msg = fmt.Sprintf("refusing to %s %s: at %s it would be a tool-owned tree's marker or lie in one (node_modules, a venv, a tagged cache), where the guard refuses no overwrite of what it holds; move the files one by one (mv does after this refusal), or copy them (cp -r)", op.verb(), path, to)
	}
	return g.refuseName(who, op, path, msg)
}

// refuseName records the refusal msg of op on path (CodeExemptName) and
// returns EXDEV, or 0 in ModeWarn (recorded as a warning).
func (g *Guard) refuseName(who Asker, op Op, path, msg string) syscall.Errno {
	comm := ""
	if who.Caller.Comm != nil {
		comm = who.Caller.Comm()
	}
	if g.mode == ModeWarn {
		msg = WarnPrefix + msg
	}
	g.RecordDenial(Denial{
		Warned:  g.mode == ModeWarn,
		Time:    time.Now(),
		Session: who.Caller.Session,
		Pid:     who.Pid,
		Comm:    comm,
		Op:      op,
		Path:    path,
		Code:    CodeExemptName,
		Message: msg,
	})
	if g.mode == ModeWarn {
		return 0
	}
	return syscall.EXDEV
}
