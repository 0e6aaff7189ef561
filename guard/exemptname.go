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
	comm := ""
	if who.Caller.Comm != nil {
		comm = who.Caller.Comm()
	}
	msg := fmt.Sprintf("refusing to %s %s: %s is exempt from the guard and the journal, so writes through it would change %s unguarded and unjournaled; copy it instead (cp)", op.verb(), path, to, path)
	if path == to {
		msg = fmt.Sprintf("refusing to link an open file that has other names at the exempt name %s: %s is exempt from the guard and the journal, so writes through it would change the file under its other names unguarded and unjournaled; copy it instead (cp)", to, to)
	}
	if op == OpMoveExempt {
		msg = fmt.Sprintf("refusing to %s %s: %s is exempt from the guard and the journal, so the files below it would change unguarded; read them first and move them one by one (mv does after this refusal), or copy them (cp -r)", op.verb(), path, to)
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
