package daemon

// The exemption policy's life in the daemon (docs/DESIGN.md#exempt-widening):
// opened before mounting from STATE_DIR/policy.json, shared by the guard's
// and the journal's matchers, told of rule files edited outside the mount,
// closed (its span ended) at unmount.

import (
	"path"
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
// the mount: the owner's own edits (ignore.Policy.External). A .gitignore
// in a directory m exempts is skipped: git never reads it there (an
// install of packages outside the mount changes thousands of them). On a
// shared mount nothing is: another mount's session looks external here.
func (d *Daemon) acceptExternal(m *ignore.Matcher, evs []watcher.Event) {
	p := m.Policy()
	if p == nil {
		return
	}
	var rels []string
	for _, ev := range evs {
		if ignore.IsRuleFile(ev.Path) && (ev.Path == ".git/info/exclude" || path.Dir(ev.Path) == "." || !m.Exempt(path.Dir(ev.Path), true)) {
			rels = append(rels, ev.Path)
		}
	}
	if len(rels) > 0 && d.FS.CrossMount().SharedMode() == "off" {
		p.External(rels...)
	}
}

// closePolicy ends this mount's span in the state file.
func (d *Daemon) closePolicy() error {
	if d.policy == nil {
		return nil
	}
	return d.policy.Close()
}
