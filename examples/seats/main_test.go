package main

import (
	"testing"

	"github.com/holdfast/holdfast/internal/testserver"
)

func TestSeats(t *testing.T) {
	srv := testserver.Start(t)
	out := srv.Run(t, run, "--show", "gala")
	testserver.WantAll(t, out,
		"show gala: seats A1-A4 on sale",
		"bob wants A3+A2: resource_busy, and A3 stays available",
		"alice paid: lease ", " is active",
		"carol's hold expired: epoch 2",
		"dave books A3: lease ",
	)
	// A second run, for another show, on the same server.
	srv.Run(t, run)
}
