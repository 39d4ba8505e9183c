// Command holdfast runs the Holdfast service (`holdfast serve`) and talks to it (the
// client verbs, `watch`, `bench`).
//
// The command line is declared as structs for kong (github.com/alecthomas/kong): each
// command is a struct whose fields are its flags and arguments and whose Run method does
// the work. kong gives the conventions users of the nats CLI and etcdctl expect — help on
// stdout with exit 0, one-line errors with the nearest command or flag, `--flag value` and
// `--flag=value`, flags after arguments — and its model feeds the completion scripts.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/holdfast/holdfast/bridge"
)

// cliRoot is the whole command line.
type cliRoot struct {
	Serve      serveCmd      `cmd:"" help:"Run the Holdfast service (embeds NATS with JetStream unless --nats is given)."`
	Resource   resourceCmd   `cmd:"" help:"Create, read or delete a named resource."`
	Pool       poolCmd       `cmd:"" help:"Create, read or delete a capacity pool."`
	Range      rangeCmd      `cmd:"" help:"Create, read or delete a value range."`
	Lease      leaseCmd      `cmd:"" help:"Reserve, activate, renew, release, revoke, reclaim, read or list leases."`
	RunCmd     runCmd        `cmd:"" name:"run" help:"Create, read, end or delete a run of work shards."`
	Work       workCmd       `cmd:"" help:"Read a work shard, or unpark a parked one."`
	Cluster    clusterCmd    `cmd:"" help:"Show which node serves which shard; show or change a cluster's settings."`
	Watch      watchCmd      `cmd:"" help:"Follow events live, or replay them from the event stream."`
	Reclaimer  reclaimerCmd  `cmd:"" help:"Reclaim leases whose keep-alive lapsed, after a grace period (the external observer)."`
	Snapshot   snapshotCmd   `cmd:"" help:"Back up a running service into a file, check a copy, restore one into a data directory."`
	Bench      benchCmd      `cmd:"" help:"Load test: concurrent reserve + release cycles over NATS."`
	Completion completionCmd `cmd:"" help:"Print a shell completion script: source <(holdfast completion bash)."`
	Version    versionCmd    `cmd:"" help:"Print the version."`
	Complete   completeCmd   `cmd:"" name:"__complete" hidden:""`
}

const rootAbout = `Holdfast: fenced, time-bounded leases on NATS.

Client commands reach NATS by --server, NATS_URL or a nats context (--context,
NATS_CONTEXT); flags go before or after the command (holdfast --server URL lease get
3-4); serve flags also come from HOLDFAST_<FLAG>.`

// exitCode is a command's result: the process exit code, carried as an error so that a
// kong Run method can return it (exitOK included).
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// kongExit is how kong's own exits (after --help) reach runCLI: a panic it recovers.
type kongExit int

// errHelp says the help was printed: nothing to run.
var errHelp = errors.New("help printed")

// newParser builds the parser over root, printing to e.
func newParser(e *env, root *cliRoot) (*kong.Kong, error) {
	return kong.New(root,
		kong.Name("holdfast"),
		kong.Description(rootAbout),
		kong.Writers(e.stdout, e.stderr),
		kong.Exit(func(code int) { panic(kongExit(code)) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true, WrapUpperBound: 100}),
		kong.Help(printHelp),
		kong.ValueFormatter(helpValue),
		kong.ExplicitGroups([]kong.Group{{Key: "connection", Title: "Connection flags:"}}),
		kong.TypeMapper(reflect.TypeOf(time.Duration(0)), durationMapper{}),
		kong.Vars(flagDefaults()),
		kong.Bind(e),
	)
}

// parse parses args (the command first) into a fresh root. The error is errHelp when
// help was asked for and printed, else a parse error for the user.
func parse(e *env, args []string) (kctx *kong.Context, root *cliRoot, err error) {
	root = &cliRoot{}
	p, err := newParser(e, root)
	if err != nil {
		return nil, nil, err // a mistake in the declarations: the tests catch it
	}
	serveEnv(p.Model)
	args = hoistFlags(p.Model, args)
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(kongExit); !ok {
				panic(r)
			}
			kctx, err = nil, errHelp
		}
	}()
	kctx, err = p.Parse(args)
	return kctx, root, err
}

// hoistFlags moves the flags given before the command (`holdfast --server nats://h:4222
// lease get 3-4`, as the nats CLI takes its connection flags) to after it, where kong
// takes a command's flags. A flag takes the next word as its value unless it is boolean
// in the model or written --flag=value. Without a command word, args stay as they are.
func hoistFlags(app *kong.Application, args []string) []string {
	bools := map[string]bool{"-h": true, "--help": true}
	_ = kong.Visit(app, func(n kong.Visitable, next kong.Next) error {
		if f, ok := n.(*kong.Flag); ok && f.IsBool() {
			bools["--"+f.Name] = true
		}
		return next(nil)
	})
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "--" {
		if !strings.Contains(args[i], "=") && !bools[args[i]] {
			i++ // its value
		}
		i++
	}
	if i == 0 || i >= len(args) {
		return args
	}
	return append(append([]string(nil), args[i:]...), args[:i]...)
}

// runCLI runs a command line (the command first) and returns the exit code: help on
// stdout with 0, a mistake in one line with the nearest command or flag and exit 2.
func runCLI(e *env, args []string) int {
	if len(args) > 0 && args[0] == "help" { // `holdfast help lease` is `holdfast lease --help`
		args = append(append([]string(nil), args[1:]...), "--help")
	}
	kctx, _, err := parse(e, args)
	switch {
	case errors.Is(err, errHelp):
		return exitOK
	case err != nil:
		name := "holdfast"
		var pe *kong.ParseError
		if errors.As(err, &pe) && pe.Context != nil && pe.Context.Selected() != nil {
			name += " " + strings.TrimSpace(pe.Context.Selected().Path())
		}
		fmt.Fprintf(e.stderr, "%s: %s (run '%s --help' for help)\n", name, err, name)
		return exitUsage
	}
	if sel := kctx.Selected(); sel != nil {
		e.cmd = strings.TrimSpace(sel.Path())
	}
	err = kctx.Run()
	var code exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	}
	e.errorf("%v", err)
	return exitDomain
}

// runMain runs the process's command line against stdout and stderr, under a context
// that ends on SIGINT or SIGTERM.
func runMain(args []string, stdout, stderr io.Writer) int {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if len(args) == 0 {
		// No command: the help, on stderr, as a usage error.
		runCLI(&env{stdout: stderr, stderr: stderr, ctx: ctx}, []string{"--help"})
		return exitUsage
	}
	return runCLI(&env{stdout: stdout, stderr: stderr, ctx: ctx}, args)
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

type versionCmd struct{}

func (versionCmd) Run(e *env) error {
	fmt.Fprintf(e.stdout, "holdfast %s %s %s/%s\n", bridge.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// printHelp is kong's help with the exit codes of the client commands after it.
func printHelp(options kong.HelpOptions, kctx *kong.Context) error {
	if err := kong.DefaultHelpPrinter(options, kctx); err != nil {
		return err
	}
	sel := kctx.Selected()
	if sel == nil {
		return nil
	}
	if codes, ok := exitCodesOf[strings.Fields(sel.Path())[0]]; ok {
		fmt.Fprintf(kctx.Stdout, "\n%s", codes)
	}
	return nil
}

// helpValue is a flag's help with its environment variable and, where a placeholder
// takes the place kong shows a default in, the default.
func helpValue(v *kong.Value) string {
	h := kong.DefaultHelpValueFormatter(v)
	if v.Flag != nil && v.Flag.PlaceHolder != "" && v.HasDefault && v.Default != "" {
		h += " Default: " + v.Default + "."
	}
	return h
}

// durationMapper parses a Go duration, and says what unit a bare number needs.
type durationMapper struct{}

func (durationMapper) Decode(ctx *kong.DecodeContext, target reflect.Value) error {
	var s string
	if err := ctx.Scan.PopValueInto("duration", &s); err != nil {
		return err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if isNumber(s) {
			return fmt.Errorf("%q needs a unit, e.g. %ss or %sms", s, s, s)
		}
		return fmt.Errorf("%q is not a duration (e.g. 30s, 1m30s, 250ms)", s)
	}
	target.Set(reflect.ValueOf(d))
	return nil
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range strings.TrimPrefix(s, "-") {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return true
}

// explicitFlags are the flags given on the command line or by their environment
// variable (not left at their default).
func explicitFlags(kctx *kong.Context) map[string]bool {
	set := map[string]bool{}
	for _, p := range kctx.Path {
		if p.Flag != nil {
			set[p.Flag.Name] = true
		}
	}
	for _, f := range kctx.Flags() {
		for _, env := range f.Envs {
			if _, ok := os.LookupEnv(env); ok {
				set[f.Name] = true
			}
		}
	}
	return set
}
