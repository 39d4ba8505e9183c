package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// holdAddr keeps an address busy until the test ends, as another process would.
func holdAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

var errorLine = regexp.MustCompile(`(?m)^.*level=ERROR.*$`)

// Every start-up failure is one line naming what failed and a non-zero exit, and leaves
// nothing running: the embedded NATS port and the data directory are free again at once.
// (A second server on one host with its own --listen but the default metrics port
// panicked with a Go stack trace and exit 2.)
func TestServeStartupFailuresAreOneLine(t *testing.T) {
	busy := holdAddr(t)
	data := filepath.Join(t.TempDir(), "data")
	for _, c := range []struct {
		name  string
		args  func(listen string) []string
		names string
	}{
		{"metrics port in use", func(l string) []string {
			return []string{"--data", data, "--listen", l, "--metrics-listen", busy}
		}, "--metrics-listen " + busy},
		{"NATS port in use", func(string) []string {
			return []string{"--data", data, "--listen", busy, "--metrics-listen", ""}
		}, busy},
		{"no NATS at --nats", func(l string) []string {
			return []string{"--data", data, "--nats", "nats://" + freeAddr(t), "--metrics-listen", ""}
		}, "NATS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			listen := freeAddr(t)
			run := startServe(t, c.args(listen)...)
			code := <-run.done
			run.done <- code
			log := run.log.String()
			lines := errorLine.FindAllString(log, -1)
			if code != 1 || len(lines) != 1 || !strings.Contains(lines[0], c.names) || strings.Contains(log, "goroutine ") {
				t.Fatalf("exit %d, %d error lines, want 1 naming %q:\n%s", code, len(lines), c.names, log)
			}
			// Nothing left running: the same data directory and --listen serve at once.
			ok := startServe(t, "--data", data, "--listen", listen, "--metrics-listen", "")
			ok.ready(t)
			if code := ok.stop(t); code != 0 {
				t.Fatalf("the start after the failure exited %d:\n%s", code, ok.log)
			}
		})
	}

	// A data directory in use by another server: refused, naming it.
	first := startServe(t, "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "")
	first.ready(t)
	second := startServe(t, "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "")
	code := <-second.done
	second.done <- code
	if lines := errorLine.FindAllString(second.log.String(), -1); code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "in use by another holdfast process") {
		t.Fatalf("a second server on the data directory: exit %d:\n%s", code, second.log)
	}
}

// A first start that fails on a taken port fixes nothing in the new data directory: a
// retry may choose another --shards (it used to be refused, the count already recorded).
func TestFailedFirstStartFixesNoLayout(t *testing.T) {
	busy := holdAddr(t)
	data := filepath.Join(t.TempDir(), "data")
	run := startServe(t, "--data", data, "--listen", busy, "--metrics-listen", "", "--shards", "2")
	code := <-run.done
	run.done <- code
	if code != 1 {
		t.Fatalf("start on a taken port: exit %d:\n%s", code, run.log)
	}
	if _, err := os.Stat(filepath.Join(data, serveLayoutFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed start recorded a layout: %v", err)
	}
	ok := startServe(t, "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--shards", "3")
	ok.ready(t)
	if code := ok.stop(t); code != 0 {
		t.Fatalf("the retry with --shards 3 exited %d:\n%s", code, ok.log)
	}
	if got, err := ensureLayout(data, serveLayout{Shards: 8, SlotMillis: 100}, map[string]bool{}); err != nil || got.Shards != 3 {
		t.Fatalf("recorded layout %+v, %v; want 3 shards", got, err)
	}
}
