package benchkit

// Step is one phase of a workload: a name for the tables and a script
// that /bin/sh runs in the target directory (Run).
type Step struct{ Name, Script string }

// AgentSteps is the coding-agent workload of bench/agent and bench/floor,
// in order: each a real tool, run by /bin/sh in the target directory with
// $ORIGIN naming the repository to clone (MakeOrigin). The last step
// removes what the first made, so the list can run again in the same
// directory.
var AgentSteps = []Step{
	// file:// makes git pack and unpack on every target; a plain local
	// path would hardlink objects on native only.
	{"clone", "git clone -q \"file://$ORIGIN\" work"},
	{"status", "cd work && git status --porcelain >/dev/null"},
	{"git-grep", "cd work && git grep -n 'func New' >/dev/null"},
	{"grep-rn", "cd work && grep -rn --exclude-dir=.git 'func New' . >/dev/null"},
	{"read-all", "cd work && git ls-files -z | xargs -0 cat >/dev/null"},
	{"find", "find . >/dev/null"},
	{"edit", "cd work && git ls-files '*.go' | head -300 | while read f; do cat \"$f\" >/dev/null; sed -i 's/^package /package /; 1s/^/\\/\\/ edited\\n/' \"$f\"; done"},
	{"diff", "cd work && git diff --stat >/dev/null"},
	{"status-dirty", "cd work && git status --porcelain >/dev/null"},
	{"restore", "cd work && git checkout -q -- ."},
	{"rm", "rm -rf work"},
}

// SwitchSteps is bench/agent's branch-switch workload (-workload switch):
// a clone of a repository with two branches (MakeBranchedOrigin), a
// checkout of the old branch, which rewrites, creates and removes
// thousands of files, the checkout back, and the removal of the clone.
var SwitchSteps = []Step{
	{"clone", "git clone -q \"file://$ORIGIN\" work"},
	{"switch", "cd work && git checkout -q old"},
	{"switch-back", "cd work && git checkout -q main"},
	{"rm", "rm -rf work"},
}

// Steps returns the steps of list named in names, in list's order (a
// read-side subset of AgentSteps, say).
func Steps(list []Step, names ...string) []Step {
	var out []Step
	for _, s := range list {
		for _, n := range names {
			if s.Name == n {
				out = append(out, s)
				break
			}
		}
	}
	return out
}
