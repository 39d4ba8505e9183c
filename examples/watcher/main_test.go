package main

import (
	"strings"
	"testing"

	"github.com/holdfast/holdfast/internal/testserver"
)

func TestWatcher(t *testing.T) {
	out := testserver.Start(t).Run(t, run, "--resource", "lab1/lamp")
	testserver.WantAll(t, out,
		"live:\n  resource.created ", "resource=lab1/lamp state=available",
		"\n  lease.reserved ", "state=reserved fence=", "@1\n",
		"\n  lease.activated ", "state=active",
		"\n  lease.released ", "state=released", "@2\n",
		"replay from the stream:\n  seq=",
	)
	if n := strings.Count(out, "  seq="); n != 3 {
		t.Errorf("%d replayed events:\n%s", n, out)
	}
}
