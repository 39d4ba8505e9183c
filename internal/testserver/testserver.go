// Package testserver runs a real Holdfast in-process for the tests of the examples and the client,
// through the composition root (server.Start): its own data directory, an embedded NATS
// server on a free loopback port and 10ms slots; it stops at the end of the test.
package testserver

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/server"
)

// Server is a running Holdfast.
type Server struct {
	// URL is the NATS URL clients use.
	URL string
	// Dir is the data directory.
	Dir string

	srv *server.Server
}

// Start starts a Holdfast with 8 shards and 10ms slots, and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	const slot = 10 * time.Millisecond
	k := kernel.DefaultConfig()
	k.SlotMillis = uint64(slot / time.Millisecond)
	k.DedupeWindowSlots, k.HistoryWindowSlots = uint64(10*time.Minute/slot), uint64(10*time.Minute/slot)
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Config{Data: dir, Shards: 8, Slot: slot, Kernel: k})
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	s := &Server{URL: srv.URL(), Dir: dir, srv: srv}
	t.Cleanup(s.Stop)
	return s
}

// Stop stops the server as SIGTERM would: requests answered, journals flushed.
func (s *Server) Stop() { _ = s.srv.Shutdown(context.Background()) }

// Program is an example's entry point: its flags, and where it prints.
type Program func(ctx context.Context, args []string, out io.Writer) error

// Run runs the example against s, with --server and then args, within a minute, and
// returns what it printed; an error ends the test.
func (s *Server) Run(t testing.TB, run Program, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, append([]string{"--server", s.URL}, args...), &out); err != nil {
		t.Fatalf("run %q: %v\noutput:\n%s", args, err, out.String())
	}
	return out.String()
}

// WantAll reports each of wants that out does not contain.
func WantAll(t testing.TB, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
