package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Shell completion: `holdfast completion bash|zsh` prints a script that asks the binary
// itself (`holdfast __complete WORDS...`) for the candidates, so commands, verbs and flags
// complete from the same definitions the commands parse with.

func init() {
	register("completion", "print a shell completion script (bash or zsh): source <(holdfast completion bash)", cmdCompletion)
	register("__complete", "", cmdComplete)
}

// verbsOf are the verbs of the object commands (dispatch's tables).
var verbsOf = map[string][]string{
	"resource": {"create", "get"},
	"pool":     {"create", "get"},
	"range":    {"create", "get"},
	"lease":    {"reserve", "activate", "renew", "release", "revoke", "reclaim", "get", "list"},
	"cluster":  {"status"},
	"run":      {"create", "get", "complete", "fail", "cancel"},
	"work":     {"get", "unpark"},
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

func cmdCompletion(args []string) int {
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		fmt.Fprintln(os.Stderr, "usage: holdfast completion bash|zsh   (e.g. source <(holdfast completion bash))")
		return exitUsage
	}
	if args[0] == "bash" {
		fmt.Print(bashCompletion)
	} else {
		fmt.Print(zshCompletion)
	}
	return exitOK
}

func cmdComplete(args []string) int {
	for _, c := range completions(args) {
		fmt.Println(c)
	}
	return exitOK
}

// completions are the candidates for the last of words (the word being typed), given the
// ones before it.
func completions(words []string) []string {
	if len(words) == 0 {
		return nil
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	var cands []string
	switch {
	case len(before) == 0:
		cands = append(cands, "version", "help")
		for n := range commands {
			if !strings.HasPrefix(n, "__") {
				cands = append(cands, n)
			}
		}
	case len(before) == 1 && verbsOf[before[0]] != nil && !strings.HasPrefix(cur, "-"):
		cands = verbsOf[before[0]]
	case len(before) == 1 && before[0] == "completion":
		cands = []string{"bash", "zsh"}
	case strings.HasPrefix(cur, "-"):
		cands = flagsOf(before)
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

// flagsOf are the flags of the command the words name, found by building its flag set:
// the command runs with --help against a discarded output.
func flagsOf(before []string) []string {
	run, ok := cliRuns[before[0]]
	var args []string
	name := before[0]
	if verbsOf[name] != nil && len(before) > 1 {
		args = append(args, before[1])
		name += " " + before[1]
	}
	var fs *flag.FlagSet
	switch {
	case ok:
		e := &env{stdout: io.Discard, stderr: io.Discard, ctx: context.Background()}
		run(e, append(args, "--help"))
		for f := range usages {
			if f.Name() == name {
				fs = f
			}
		}
	case name == "serve":
		var b bytes.Buffer
		saved := serveHelpOut
		serveHelpOut = &b
		_, _ = parseServeFlags([]string{"--help"})
		serveHelpOut = saved
		var out []string
		for _, line := range strings.Split(b.String(), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "-") {
				out = append(out, "-"+f[0])
			}
		}
		return out
	}
	if fs == nil {
		return nil
	}
	var out []string
	fs.VisitAll(func(f *flag.Flag) { out = append(out, "--"+f.Name) })
	return out
}
