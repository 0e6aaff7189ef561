package main

// Shell completion through urfave/cli's own: the app answers
// `--generate-bash-completion` (EnableBashCompletion) with the words that
// may follow, and the bash and zsh scripts below (urfave/cli v2's
// autocomplete/bash_autocomplete and zsh_autocomplete, with the program name
// filled in) ask it; fish gets the static script App.ToFishCompletion
// generates.

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// bashCompletion is urfave/cli v2's autocomplete/bash_autocomplete for
// rubinofs. Load it with `source <(rubinofs completion bash)`, or install it
// as /etc/bash_completion.d/rubinofs.
const bashCompletion = `# bash completion for rubinofs (urfave/cli's bash_autocomplete)
# Load: source <(rubinofs completion bash); install: rubinofs completion bash > /etc/bash_completion.d/rubinofs

# Macs have bash3 for which the bash-completion package doesn't include
# _init_completion. This is a minimal version of that function.
_rubinofs_cli_init_completion() {
  COMPREPLY=()
  _get_comp_words_by_ref "$@" cur prev words cword
}

_rubinofs_bash_autocomplete() {
  if [[ "${COMP_WORDS[0]}" != "source" ]]; then
    local cur opts base words cword
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    if declare -F _init_completion >/dev/null 2>&1; then
      _init_completion -n "=:" || return
    elif declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
      _rubinofs_cli_init_completion -n "=:" || return
    else
      words=("${COMP_WORDS[@]}")
      cword=$COMP_CWORD
    fi
    words=("${words[@]:0:$cword}")
    if [[ "$cur" == "-"* ]]; then
      requestComp="${words[*]} ${cur} --generate-bash-completion"
    else
      requestComp="${words[*]} --generate-bash-completion"
    fi
    opts=$(eval "${requestComp}" 2>/dev/null)
    COMPREPLY=($(compgen -W "${opts}" -- ${cur}))
    return 0
  fi
}

complete -o bashdefault -o default -o nospace -F _rubinofs_bash_autocomplete rubinofs
`

// zshCompletion is urfave/cli v2's autocomplete/zsh_autocomplete for
// rubinofs. Install it as _rubinofs in a directory of $fpath, or load it
// with `source <(rubinofs completion zsh)` after compinit.
const zshCompletion = `#compdef rubinofs
# zsh completion for rubinofs (urfave/cli's zsh_autocomplete)
# Install: rubinofs completion zsh > "${fpath[1]}/_rubinofs"; or, after compinit: source <(rubinofs completion zsh)

_rubinofs_zsh_autocomplete() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi

  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}

compdef _rubinofs_zsh_autocomplete rubinofs
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "bash: source <(rubinofs completion bash), or save it as /etc/bash_completion.d/rubinofs\n" +
			"zsh:  rubinofs completion zsh > \"${fpath[1]}/_rubinofs\" (then compinit)\n" +
			"fish: rubinofs completion fish > ~/.config/fish/completions/rubinofs.fish",
		BashComplete: func(c *cli.Context) {
			if c.NArg() == 0 {
				fmt.Println("bash\nzsh\nfish")
			}
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("usage: rubinofs completion bash|zsh|fish", 2)
			}
			switch strings.ToLower(c.Args().First()) {
			case "bash":
				fmt.Print(bashCompletion)
			case "zsh":
				fmt.Print(zshCompletion)
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return cli.Exit(fmt.Sprintf("fish completion: %v", err), 1)
				}
				fmt.Print(s)
			default:
				return cli.Exit(fmt.Sprintf("unknown shell %q: bash, zsh or fish", c.Args().First()), 2)
			}
			return nil
		},
	}
}
