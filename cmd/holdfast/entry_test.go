package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// The tests' entry points into bench and serve: the same parse and Run the binary goes
// through, stopping where a test needs the configuration.

// parseBench parses bench's flags (args after "bench"); code ≥ 0 means return it at once.
func parseBench(e *env, args []string) (*benchConfig, int) {
	kctx, root, err := parse(e, append([]string{"bench"}, args...))
	switch {
	case errors.Is(err, errHelp):
		return nil, exitOK
	case err != nil:
		fmt.Fprintf(e.stderr, "holdfast bench: %v\n", err)
		return nil, exitUsage
	}
	e.cmd = "bench"
	cfg, err := root.Bench.config(e, explicitFlags(kctx))
	if err != nil {
		return nil, exitUsage
	}
	return cfg, -1
}

// parseServeFlags parses serve's flags (args after "serve") and checks them.
func parseServeFlags(args []string) (*serveConfig, error) {
	e := &env{stdout: io.Discard, stderr: io.Discard, ctx: context.Background()}
	kctx, root, err := parse(e, append([]string{"serve"}, args...))
	if err != nil {
		return nil, err
	}
	return root.Serve.config(explicitFlags(kctx))
}

// serveMain runs `holdfast serve args...` until ctx is done and returns the exit code.
func serveMain(ctx context.Context, args []string, stderr io.Writer) int {
	return runCLI(&env{stdout: io.Discard, stderr: stderr, ctx: ctx}, append([]string{"serve"}, args...))
}
