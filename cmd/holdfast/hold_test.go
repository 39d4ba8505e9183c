package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/testserver"
)

// lease reserve --hold renews the lease from the command until it is interrupted, and
// then releases it; --keepalive is refused without --activate, and --hold of an active
// lease without a keep-alive (nothing to renew) too.
func TestReserveHoldRenewsUntilInterrupted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--keepalive", "5s"}, "--keepalive needs --activate"},
		{[]string{"--activate", "--hold"}, "--hold with --activate needs --keepalive"},
	} {
		args := append([]string{"reserve", "--server", "nats://127.0.0.1:1", "--holder", "h", "--resource", "r"}, tc.args...)
		if code, _, errOut := run(t, cmdLease, args...); code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want a usage error naming %q", tc.args, code, errOut, tc.want)
		}
	}

	srv := testserver.Start(t)
	if code, _, errOut := run(t, cmdResource, "create", "gpu0", "--server", srv.URL); code != exitOK {
		t.Fatalf("resource create: %d %s", code, errOut)
	}
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.code, r.out, r.err = runCtx(ctx, cmdLease, "reserve", "--server", srv.URL, "--holder", "job-7", "--resource", "gpu0",
			"--activate", "--keepalive", "300ms", "--hold")
		done <- r
	}()
	// Held past several keep-alive lengths: the renewals keep it active.
	time.Sleep(1200 * time.Millisecond)
	if code, out, _ := run(t, cmdLease, "list", "--server", srv.URL, "--holder", "job-7"); code != exitOK || !strings.Contains(out, "active") {
		t.Fatalf("while held: %d %s", code, out)
	}
	cancel()
	select {
	case r := <-done:
		if r.code != exitOK || !strings.Contains(r.out, "ok lease.release") || !strings.Contains(r.err, "holding lease") {
			t.Fatalf("interrupted hold: exit %d\n%s\n%s", r.code, r.out, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hold did not end when interrupted")
	}
	if code, out, _ := run(t, cmdLease, "reserve", "--server", srv.URL, "--holder", "next", "--resource", "gpu0"); code != exitOK {
		t.Fatalf("gpu0 after the hold ended: %d %s", code, out)
	}
}
