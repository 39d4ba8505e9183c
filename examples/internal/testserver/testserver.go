// Package testserver runs a real `holdfast serve` for the tests of the
// examples: it builds ./cmd/holdfast with `go build` into a temporary
// directory, starts it with its own data directory, an embedded NATS server on
// a free loopback port, metrics on a random port and 10ms slots, waits for
// the line that says `ready`, and stops it at the end of the test.
package testserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/buildbin"
)

// Server is a running `holdfast serve`.
type Server struct {
	// URL is the NATS URL clients use.
	URL string
	// Dir is the data directory.
	Dir string
	// Bin is the holdfast binary.
	Bin string

	cmd  *exec.Cmd
	logs *lockedBuffer
	done chan struct{}
	err  error
}

// StartTimeout bounds the wait for the ready line.
var StartTimeout = 60 * time.Second

var urlPattern = regexp.MustCompile(`nats://[0-9A-Za-z.\-\[\]:]+`)

// Start builds and starts the server with the default test flags plus
// extra (later flags win), and stops it when the test ends. If the binary
// has no `serve` command yet, the test is skipped.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := Build(t)
	port := freePort(t)
	s := &Server{Dir: t.TempDir(), Bin: bin, logs: &lockedBuffer{}, done: make(chan struct{})}
	args := []string{"serve",
		"--data", s.Dir,
		"--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--metrics-listen", "127.0.0.1:0",
		"--slot", "10ms",
	}
	args = append(args, extra...)
	s.cmd = exec.Command(bin, args...)
	pr, pw := io.Pipe()
	s.cmd.Stdout = pw
	s.cmd.Stderr = pw
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("testserver: start %s: %v", bin, err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			s.logs.WriteLine(line)
			if !sent && strings.Contains(line, "ready") {
				ready <- line
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		s.err = s.cmd.Wait()
		_ = pw.Close()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("holdfast serve output:\n%s", s.Logs())
		}
	})

	select {
	case line := <-ready:
		s.URL = urlPattern.FindString(line)
		if s.URL == "" {
			s.URL = fmt.Sprintf("nats://127.0.0.1:%d", port)
		}
	case <-s.done:
		// Give the reader a moment to collect the last lines.
		time.Sleep(50 * time.Millisecond)
		logs := s.Logs()
		if strings.Contains(logs, `unknown command "serve"`) {
			t.Skipf("testserver: this holdfast binary has no serve command yet:\n%s", logs)
		}
		t.Fatalf("testserver: holdfast serve exited before ready (%v):\n%s", s.err, logs)
	case <-time.After(StartTimeout):
		t.Fatalf("testserver: no ready line after %v:\n%s", StartTimeout, s.Logs())
	}
	return s
}

// Logs returns what the server printed so far.
func (s *Server) Logs() string { return s.logs.String() }

// Stop stops the server: SIGTERM, then SIGKILL if it has not exited after
// 15 seconds. It is safe to call more than once.
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Kill stops the server with SIGKILL at once.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Build builds ./cmd/holdfast of this module into a temporary directory of
// the test and returns the binary's path.
func Build(t testing.TB) string {
	t.Helper()
	bin, err := buildbin.Build(t.TempDir())
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	return bin
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
	b.buf.WriteByte('\n')
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

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
