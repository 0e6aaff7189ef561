package guard

import (
	"strings"
	"syscall"
	"testing"
)

// TestRefuseExemptName: enforcing, the refusal is EXDEV and logged with its
// code, op and reason; in warn mode it is allowed and logged as a
// warning; with the guard off it is allowed and nothing is logged. The
// same for RefuseToolTree, whose reason names the tool-owned tree.
func TestRefuseExemptName(t *testing.T) {
	who := Asker{Caller: Caller{Session: "s"}, Pid: 7}
	for _, c := range []struct {
		mode    Mode
		errno   syscall.Errno
		logged  bool
		warning bool
	}{{ModeEnforce, syscall.EXDEV, true, false}, {ModeWarn, 0, true, true}, {ModeOff, 0, false, false}} {
		for _, r := range []struct {
			tool   bool
			reason string
		}{{false, "gen/x.c is exempt"}, {true, "at gen/x.c it would be a tool-owned tree's marker or lie in one"}} {
			g := New(Config{Mode: c.mode})
			refuse := g.RefuseExemptName
			if r.tool {
				refuse = g.RefuseToolTree
			}
			if errno := refuse(who, OpMoveExempt, "src/x.c", "gen/x.c"); errno != c.errno {
				t.Errorf("mode %v: errno %v, want %v", c.mode, errno, c.errno)
			}
			ds := g.Denials("s")
			if !c.logged {
				if len(ds) != 0 {
					t.Errorf("mode %v: logged %+v", c.mode, ds)
				}
				continue
			}
			if len(ds) != 1 || ds[0].Code != CodeExemptName || ds[0].Op != OpMoveExempt || ds[0].Path != "src/x.c" ||
				ds[0].Warned != c.warning || !strings.Contains(ds[0].Message, r.reason) {
				t.Errorf("mode %v: logged %+v", c.mode, ds)
			}
		}
	}
}
