package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/examples/internal/testserver"
)

func TestSeats(t *testing.T) {
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"--server", srv.URL, "--show", "gala"}, &out); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{
		"show gala: seats A1-A4 on sale",
		"bob wants A3+A2: resource_busy, and A3 stays available",
		"alice paid: lease ", " is active",
		"carol's hold expired: epoch 2",
		"dave books A3: lease ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// A second run, for another show, on the same server.
	out.Reset()
	if err := run(ctx, []string{"--server", srv.URL}, &out); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
}
