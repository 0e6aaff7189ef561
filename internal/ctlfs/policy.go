package ctlfs

// .rubino/policy: the ignore rules the mount's owner accepted and those
// written since, which exempt nothing until the owner reloads
// (docs/DESIGN.md#exempt-widening).

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"time"

	"github.com/rubinofs/rubinofs/ctltree"
	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/sessions"
)

// policyHint is what the status and the policy file tell a reader to do
// about pending rules.
const policyHint = "rules added since the last acceptance exempt nothing yet; the mount owner accepts them with `rubinofs policy reload` from outside every session"

// policyEntry is the control file .rubino/policy: read, the accepted rules
// and the pending changes (JSON); written, the command "reload".
func (t *Tree) policyEntry() ctltree.Entry {
	return ctltree.Entry{Name: "policy", Node: &ctltree.File{Kind: ctltree.Ctl,
		Read: t.readPolicy, Write: t.writePolicy}}
}

// policyDoc is the JSON of .rubino/policy.
type policyDoc struct {
	AcceptedAt time.Time           `json:"accepted_at"`
	Accepted   map[string][]string `json:"accepted"`
	Pending    []ignore.Pending    `json:"pending"`
	Hint       string              `json:"hint,omitempty"`
	SaveError  string              `json:"save_error,omitempty"`
}

// readPolicy renders .rubino/policy for the mount's owner and root; any
// other caller gets EACCES (the rules name files in directories it may
// not read).
func (t *Tree) readPolicy(_ context.Context, c ctltree.Caller) ([]byte, error) {
	if !c.Privileged {
		return nil, ctltree.Errorf(syscall.EACCES, "only the mount owner (uid %d) or root may read the exemption policy", t.cfg.Owner)
	}
	p := t.cfg.Policy
	doc := policyDoc{AcceptedAt: p.AcceptedAt().UTC(), Accepted: p.Accepted(), Pending: p.Pending()}
	if doc.Pending == nil {
		doc.Pending = []ignore.Pending{}
	} else {
		doc.Hint = policyHint
	}
	if err := p.SaveErr(); err != nil {
		doc.SaveError = err.Error()
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

// writePolicy takes "reload": every rule on disk becomes accepted. Only
// the mount's owner or root, from outside every session, may: EPERM
// otherwise, so no session widens its own exemptions. Another command is
// EINVAL; a failure to keep the state file is EIO (the rules are accepted
// for this mount all the same).
func (t *Tree) writePolicy(c ctltree.Caller, cmd []byte) error {
	verb := strings.TrimSpace(string(cmd))
	if verb != "reload" {
		return ctltree.Errorf(syscall.EINVAL, "unknown command %q: .rubino/policy takes \"reload\"", verb)
	}
	if !c.Privileged {
		return ctltree.Errorf(syscall.EPERM, "only the mount owner (uid %d) or root may accept exemption rules; you are uid %d", t.cfg.Owner, c.Uid)
	}
	if c.Session != sessions.Default && c.Session != sessions.DefaultFor(c.Uid, t.cfg.Owner) {
		return ctltree.Errorf(syscall.EPERM, "session %s may not accept exemption rules: run `rubinofs policy reload` from outside every session", c.Session)
	}
	accepted, err := t.cfg.Policy.Reload()
	paths := make([]string, len(accepted))
	for i, p := range accepted {
		paths[i] = p.Path
	}
	t.cfg.Logger.Info("exemption rules accepted", "uid", c.Uid, "pid", c.Pid, "changed_files", paths)
	if err != nil {
		return ctltree.Errorf(syscall.EIO, "rules accepted for this mount, but keeping them failed: %v", err)
	}
	return nil
}

// policyStatus is the "policy" key of .rubino/status: when rules were
// last accepted and which rule files have changes waiting.
func (t *Tree) policyStatus() (string, any) {
	p := t.cfg.Policy
	pending := []string{}
	for _, e := range p.Pending() {
		pending = append(pending, e.Path)
	}
	v := map[string]any{"accepted_at": p.AcceptedAt().UTC().Format(time.RFC3339Nano), "pending": pending}
	if len(pending) > 0 {
		v["hint"] = policyHint
	}
	return "policy", v
}
