package tests

// Shell completion: `rubinofs completion bash|zsh|fish`
// prints scripts built on urfave/cli's completion, and the app answers
// --generate-bash-completion with its subcommands.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// subcommands are the top-level commands completion must offer.
var subcommands = []string{"mount", "unmount", "status", "run", "compact", "agents", "doctor", "completion", "version"}

// wantAll fails the test unless every one of words is a word of out (the
// part of a word before a colon: zsh's "name:description").
func wantAll(t *testing.T, what, out string, words []string) {
	t.Helper()
	have := map[string]bool{}
	for _, w := range strings.Fields(out) {
		have[strings.SplitN(w, ":", 2)[0]] = true
	}
	for _, w := range words {
		if !have[w] {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// TestCompletion checks the app's completion answers, that the bash
// script parses, loads and completes through the binary, and that the zsh
// and fish scripts name the subcommands (and parse, where zsh or fish is
// installed).
func TestCompletion(t *testing.T) {
	bin := rubinofsBin(t)
	tmp := t.TempDir()
	out, err := cli(t, tmp, "--generate-bash-completion")
	if err != nil {
		t.Fatalf("--generate-bash-completion: %v\n%s", err, out)
	}
	wantAll(t, "rubinofs --generate-bash-completion", out, subcommands)
	out, err = cli(t, tmp, "compact", "--generate-bash-completion")
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "rubinofs compact --generate-bash-completion", out, []string{"ls", "new", "append", "status", "run", "show", "import"})
	out, _ = cli(t, tmp, "completion", "--generate-bash-completion")
	wantAll(t, "rubinofs completion --generate-bash-completion", out, []string{"bash", "zsh", "fish"})

	scripts := map[string]string{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, err := exec.Command(bin, "completion", sh).Output()
		if err != nil || len(out) == 0 {
			t.Fatalf("completion %s: %v %q", sh, err, out)
		}
		scripts[sh] = filepath.Join(tmp, "rubinofs."+sh)
		if err := os.WriteFile(scripts[sh], out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := cli(t, tmp, "completion", "tcsh"); err == nil || !strings.Contains(out, "bash, zsh or fish") {
		t.Errorf("completion tcsh: %v %s", err, out)
	}

	// bash: parses, registers the completion function, and completing
	// "rubinofs " and "rubinofs comp" asks the binary (on $PATH).
	if out, err := exec.Command("bash", "-n", scripts["bash"]).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	complete := func(words ...string) string {
		script := `source "$1"; shift; complete -p rubinofs >/dev/null || exit 3
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
_rubinofs_bash_autocomplete; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", append([]string{"-c", script, "bash", scripts["bash"]}, words...)...)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash completion of %q: %v\n%s", words, err, out)
		}
		return string(out)
	}
	wantAll(t, `bash completion of "rubinofs "`, complete("rubinofs", ""), subcommands)
	if got := strings.Fields(complete("rubinofs", "comp")); len(got) != 2 || got[0] != "compact" || got[1] != "completion" {
		t.Errorf(`bash completion of "rubinofs comp": %q, want compact and completion`, got)
	}

	zsh, _ := os.ReadFile(scripts["zsh"])
	if !strings.HasPrefix(string(zsh), "#compdef rubinofs") || !strings.Contains(string(zsh), "compdef _rubinofs_zsh_autocomplete rubinofs") {
		t.Errorf("zsh script:\n%s", zsh)
	}
	fish, _ := os.ReadFile(scripts["fish"])
	for _, c := range subcommands {
		if !strings.Contains(string(fish), "complete -c rubinofs") || !strings.Contains(string(fish), "-a '"+c) {
			t.Errorf("fish script lacks subcommand %s", c)
		}
	}
	for sh, check := range map[string][]string{"zsh": {"zsh", "-n"}, "fish": {"fish", "--no-execute"}} {
		if _, err := exec.LookPath(check[0]); err != nil {
			continue // not installed: the content checks above stand
		}
		if out, err := exec.Command(check[0], append(check[1:], scripts[sh])...).CombinedOutput(); err != nil {
			t.Errorf("%v %s: %v\n%s", check, scripts[sh], err, out)
		}
	}
}
