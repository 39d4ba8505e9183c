// Command holdfast runs the Holdfast service (`holdfast serve`) and talks to it (the
// client verbs, `watch`, `bench`).
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"

	"github.com/holdfast/holdfast/bridge"
)

// command is one subcommand. Each lives in its own file and registers itself in init,
// so the server and the client tools stay independent of each other.
type command struct {
	summary string
	run     func(args []string) int // returns the process exit code
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string) int) {
	if _, dup := commands[name]; dup {
		panic("holdfast: command registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: holdfast <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		if n[0] != '_' { // internal (__complete)
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "  version    print the version")
	fmt.Fprintln(w, "\nRun 'holdfast <command> --help' for its flags. Client commands reach NATS by --server,")
	fmt.Fprintln(w, "NATS_URL or a nats context (--context, NATS_CONTEXT); serve flags also come from HOLDFAST_<FLAG>.")
}

// runMain runs the command line and returns the exit code: help on stdout with 0, a
// mistyped command in one line with the nearest one.
func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return exitOK
	case "version", "--version":
		fmt.Fprintf(stdout, "holdfast %s %s %s/%s\n", bridge.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		names := []string{"version"}
		for n := range commands {
			names = append(names, n)
		}
		fmt.Fprintf(stderr, "holdfast: unknown command %q", args[0])
		if near, ok := closest(args[0], names); ok {
			fmt.Fprintf(stderr, "; did you mean %q?", near)
		}
		fmt.Fprintln(stderr, " Run 'holdfast --help' for the commands.")
		return exitUsage
	}
	return c.run(args[1:])
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}
