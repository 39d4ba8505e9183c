package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Shell completion: `holdfast completion bash|zsh` prints a script that asks the binary
// itself (`holdfast __complete WORDS...`) for the candidates, which come from the same
// kong model the command line is parsed with: commands, verbs, flags and enum values.

type completionCmd struct {
	Shell string `arg:"" enum:"bash,zsh" help:"bash or zsh."`
}

const bashCompletion = `# holdfast completion for bash: source <(holdfast completion bash)
_holdfast() {
  local IFS=$'\n'
  COMPREPLY=( $(holdfast __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) )
}
complete -o default -F _holdfast holdfast
`

const zshCompletion = `# holdfast completion for zsh: source <(holdfast completion zsh)
autoload -U +X bashcompinit && bashcompinit
` + bashCompletion

func (c *completionCmd) Run(e *env) error {
	if c.Shell == "bash" {
		fmt.Fprint(e.stdout, bashCompletion)
	} else {
		fmt.Fprint(e.stdout, zshCompletion)
	}
	return nil
}

// completeCmd answers the completion script: the candidates for the last word.
type completeCmd struct {
	Words []string `arg:"" optional:"" passthrough:""`
}

func (c *completeCmd) Run(e *env) error {
	for _, w := range completions(c.Words) {
		fmt.Fprintln(e.stdout, w)
	}
	return nil
}

// completions are the candidates for the last of words (the word being typed), given the
// ones before it: the subcommands of the command they name, its flags (with "-"), or the
// values of the flag or argument before it when they are an enum.
func completions(words []string) []string {
	if len(words) == 0 {
		return nil
	}
	p, err := newParser(&env{stdout: io.Discard, stderr: io.Discard, ctx: context.Background()}, &cliRoot{})
	if err != nil {
		return nil
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	node := p.Model.Node
	for _, w := range before {
		if strings.HasPrefix(w, "-") {
			continue
		}
		for _, child := range node.Children {
			if child.Name == w && !child.Hidden {
				node = child
				break
			}
		}
	}
	var cands []string
	switch {
	case strings.HasPrefix(cur, "-"):
		for _, group := range node.AllFlags(true) {
			for _, f := range group {
				cands = append(cands, "--"+f.Name)
			}
		}
	case len(before) > 0 && strings.HasPrefix(before[len(before)-1], "--"):
		for _, group := range node.AllFlags(true) {
			for _, f := range group {
				if "--"+f.Name == before[len(before)-1] && f.Enum != "" {
					cands = strings.Split(f.Enum, ",")
				}
			}
		}
	case len(node.Children) > 0:
		for _, child := range node.Children {
			if !child.Hidden {
				cands = append(cands, child.Name)
			}
		}
		if node == p.Model.Node {
			cands = append(cands, "help")
		}
	case len(node.Positional) > 0 && node.Positional[0].Enum != "":
		cands = strings.Split(node.Positional[0].Enum, ",")
	}
	var out []string
	for _, c := range cands {
		if strings.HasPrefix(c, cur) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}
