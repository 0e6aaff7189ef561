package daemon

// The exemption policy's life in the daemon (docs/DESIGN.md#exempt-widening):
// opened before mounting from STATE_DIR/policy.json, shared by the guard's
// and the journal's matchers, told of rule files edited outside the mount,
// closed (its span ended) at unmount.

import (
	"path/filepath"

	"github.com/rubinofs/rubinofs/guard/ignore"
	"github.com/rubinofs/rubinofs/watcher"
)

// policyFile is the exemption policy's state file under the state
// directory.
const policyFile = "policy.json"

// openPolicy opens the policy of the workspace reached at backing and sets
// it on the matchers (jmatcher may be nil). Without a state directory
// nothing is kept across mounts: each mount accepts the rules on disk.
func (d *Daemon) openPolicy(backing string, matchers ...*ignore.Matcher) (*ignore.Policy, error) {
	state := ""
	if d.cfg.StateDir != "" {
		state = filepath.Join(d.cfg.StateDir, policyFile)
	}
	p, err := ignore.NewPolicy(backing, state)
	if err != nil {
		return nil, err
	}
	for _, m := range matchers {
		if m != nil {
			m.SetPolicy(p)
		}
	}
	return p, nil
}

// acceptExternal accepts the rule files the watcher saw changed outside
// the mount: the owner's own edits (ignore.Policy.External).
func acceptExternal(p *ignore.Policy, evs []watcher.Event) {
	if p == nil {
		return
	}
	for _, ev := range evs {
		if ignore.IsRuleFile(ev.Path) {
			p.External(ev.Path)
		}
	}
}

// closePolicy ends this mount's span in the state file.
func (d *Daemon) closePolicy() error {
	if d.policy == nil {
		return nil
	}
	return d.policy.Close()
}
