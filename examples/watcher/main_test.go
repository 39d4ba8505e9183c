package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/examples/internal/testserver"
)

func TestWatcher(t *testing.T) {
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"--server", srv.URL, "--resource", "lab1/lamp"}, &out); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"live:\n  resource.created ", "resource=lab1/lamp state=available",
		"\n  lease.reserved ", "state=reserved fence=", "@1\n",
		"\n  lease.activated ", "state=active",
		"\n  lease.released ", "state=released", "@2\n",
		"replay from the stream:\n  seq=",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "  seq="); n != 3 {
		t.Errorf("%d replayed events:\n%s", n, text)
	}
}
