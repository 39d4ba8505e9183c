//go:build unix

// Package harness runs a real `holdfast serve` process and drives it: many concurrent
// clients over their own NATS connections (workload.go), a nemesis that kills, pauses,
// moves the clock of and fails the journal of the server and drops client connections
// (nemesis.go), and the end of a round: heal, clean stop, restart, final reads, and the
// whole event stream (round.go). Everything it does is recorded in a history.Recorder.
package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/holdfast/holdfast/internal/buildbin"
)

// Build compiles ./cmd/holdfast of this module into dir and returns the binary's path.
func Build(dir string) (string, error) { return buildbin.Build(dir) }

// ServerConfig describes how to run the server.
type ServerConfig struct {
	Bin      string
	DataDir  string
	HooksDir string
	LogPath  string // every line the server prints, across restarts (optional)
	Shards   int
	Slot     time.Duration // default 10ms
	Extra    []string      // more flags
}

// Server is the holdfast process of a test, restartable on the same data directory.
type Server struct {
	cfg ServerConfig

	mu       sync.Mutex
	p        *proc
	port     int // the NATS port, kept across restarts so clients reconnect by themselves
	url      string
	metrics  string
	starts   int
	urlGen   int // bumps when the NATS URL changes
	crashes  []string
	logTail  []string
	logFile  *os.File
	closed   bool
	paused   bool
	expected bool // the current process is meant to exit (kill, stop)
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

var (
	natsURLRE    = regexp.MustCompile(`nats=(\S+)`)
	metricsURLRE = regexp.MustCompile(`metrics=(\S+)`)
)

// NewServer prepares (does not start) a server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Slot == 0 {
		cfg.Slot = 10 * time.Millisecond
	}
	if cfg.Shards == 0 {
		cfg.Shards = 3
	}
	for _, d := range []string{cfg.DataDir, cfg.HooksDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	s := &Server{cfg: cfg}
	if cfg.LogPath != "" {
		f, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		s.logFile = f
	}
	return s, nil
}

func (s *Server) args(port int) []string {
	a := []string{"serve",
		"--data", s.cfg.DataDir,
		"--listen", "127.0.0.1:" + strconv.Itoa(port),
		"--metrics-listen", "127.0.0.1:0",
		"--slot", s.cfg.Slot.String(),
		"--test-hooks-dir", s.cfg.HooksDir,
		"--shards", strconv.Itoa(s.cfg.Shards),
	}
	return append(a, s.cfg.Extra...)
}

// Start starts the server process and waits for its ready line. It reuses the NATS port
// of the previous start; if that port is taken it takes a new one (URLGen changes).
func (s *Server) Start() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("server closed")
	}
	if s.p != nil && !s.exited(s.p) {
		s.mu.Unlock()
		return errors.New("server already running")
	}
	port := s.port
	s.mu.Unlock()
	err := s.start(port)
	if err != nil && port != 0 && strings.Contains(err.Error(), "address already in use") {
		err = s.start(0)
	}
	return err
}

func (s *Server) exited(p *proc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (s *Server) start(port int) error {
	cmd := exec.Command(s.cfg.Bin, s.args(port)...)
	setDeathSignal(cmd)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &proc{cmd: cmd, done: make(chan struct{})}
	if err := spawn(cmd); err != nil {
		return fmt.Errorf("starting %s: %w", s.cfg.Bin, err)
	}
	ready := make(chan string, 1)
	var lines []string
	var linesMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			s.logLine(line)
			linesMu.Lock()
			if len(lines) < 200 {
				lines = append(lines, line)
			}
			linesMu.Unlock()
			if !sent && strings.Contains(line, "msg=ready") {
				ready <- line
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		_ = pw.Close()
		close(p.done)
		s.mu.Lock()
		if !s.expected && s.p == p {
			s.crashes = append(s.crashes, fmt.Sprintf("holdfast exited unexpectedly (%v)", p.err))
		}
		s.mu.Unlock()
	}()
	s.mu.Lock()
	s.p, s.expected, s.paused = p, false, false
	s.mu.Unlock()
	select {
	case line := <-ready:
		u := natsURLRE.FindStringSubmatch(line)
		m := metricsURLRE.FindStringSubmatch(line)
		if u == nil {
			s.Kill()
			return fmt.Errorf("ready line without nats=: %s", line)
		}
		s.mu.Lock()
		if s.url != u[1] {
			s.urlGen++
		}
		s.url = u[1]
		if m != nil {
			s.metrics = m[1]
		}
		if i := strings.LastIndexByte(s.url, ':'); i >= 0 {
			s.port, _ = strconv.Atoi(s.url[i+1:])
		}
		s.starts++
		s.mu.Unlock()
		return nil
	case <-p.done:
		time.Sleep(50 * time.Millisecond)
		linesMu.Lock()
		defer linesMu.Unlock()
		s.mu.Lock()
		s.crashes = s.crashes[:max(0, len(s.crashes)-1)] // a failed start is reported here, not as a crash
		s.mu.Unlock()
		return fmt.Errorf("holdfast exited before ready (%v):\n%s", p.err, strings.Join(lines, "\n"))
	case <-time.After(60 * time.Second):
		s.Kill()
		return errors.New("holdfast: no ready line within 60s")
	}
}

func (s *Server) logLine(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logTail = append(s.logTail, line)
	if len(s.logTail) > 300 {
		s.logTail = s.logTail[len(s.logTail)-300:]
	}
	if s.logFile != nil {
		fmt.Fprintln(s.logFile, line)
	}
}

// LogTail is the server's last lines of output.
func (s *Server) LogTail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.logTail, "\n")
}

// URL is the NATS URL of the current (or last) process.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// URLGen changes whenever the NATS URL changes.
func (s *Server) URLGen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.urlGen
}

// MetricsURL is the metrics listener of the current process.
func (s *Server) MetricsURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.metrics
}

// Starts counts successful starts.
func (s *Server) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// Crashes lists unexpected exits of the server.
func (s *Server) Crashes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.crashes...)
}

// Running reports whether the process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	return p != nil && !s.exited(p) && p.cmd.Process.Signal(syscall.Signal(0)) == nil
}

// PID is the current process id (0 when none).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return 0
	}
	return s.p.cmd.Process.Pid
}

func (s *Server) current() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// Kill sends SIGKILL and waits for the process to be gone.
func (s *Server) Kill() {
	p := s.current()
	if p == nil {
		return
	}
	s.mu.Lock()
	s.expected, s.paused = true, false
	s.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM (resuming a paused process first) and waits up to timeout, then
// kills. It reports whether the process exited cleanly with status 0.
func (s *Server) Stop(timeout time.Duration) bool {
	p := s.current()
	if p == nil || s.exited(p) {
		return false
	}
	s.mu.Lock()
	s.expected = true
	paused := s.paused
	s.paused = false
	s.mu.Unlock()
	if paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err == nil
	case <-time.After(timeout):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		return false
	}
}

// Pause stops the process with SIGSTOP.
func (s *Server) Pause() {
	p := s.current()
	if p == nil || s.exited(p) {
		return
	}
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
}

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() {
	p := s.current()
	if p == nil || s.exited(p) {
		return
	}
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
}

// Close kills the process (if any) for good.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.Kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logFile != nil {
		s.logFile.Close()
		s.logFile = nil
	}
}

func writeFileAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SetClockOffset moves the server's clock by d (0 removes the offset). The server reads
// the file every 20ms.
func (s *Server) SetClockOffset(d time.Duration) error {
	path := filepath.Join(s.cfg.HooksDir, "clock_offset")
	if d == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return writeFileAtomic(path, d.String())
}

// SetFail makes journal appends fail ("write" or "fsync") until ClearFail.
func (s *Server) SetFail(mode string) error {
	return writeFileAtomic(filepath.Join(s.cfg.HooksDir, "fail"), mode)
}

// ClearFail removes the journal failure.
func (s *Server) ClearFail() error {
	err := os.Remove(filepath.Join(s.cfg.HooksDir, "fail"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Healthz returns the status code and body of /healthz.
func (s *Server) Healthz(ctx context.Context) (int, string, error) {
	return s.get(ctx, "/healthz")
}

func (s *Server) get(ctx context.Context, path string) (int, string, error) {
	u := s.MetricsURL()
	if u == "" {
		return 0, "", errors.New("no metrics listener")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, string(b), err
}

var metricLineRE = regexp.MustCompile(`^(holdfast_[a-z_]+)\{shard="(\d+)"\} ([0-9.e+]+)$`)

// ShardMetric reads a per-shard gauge from /metrics; shards without the series are absent.
func (s *Server) ShardMetric(ctx context.Context, name string) (map[uint32]float64, error) {
	code, body, err := s.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %d", code)
	}
	out := map[uint32]float64{}
	for _, line := range strings.Split(body, "\n") {
		m := metricLineRE.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		sh, _ := strconv.ParseUint(m[2], 10, 32)
		v, _ := strconv.ParseFloat(m[3], 64)
		out[uint32(sh)] = v
	}
	return out, nil
}

// StartProcess starts cmd so that it dies with the test process (Linux), for tests that
// run their own arrangement of server processes.
func StartProcess(cmd *exec.Cmd) error {
	setDeathSignal(cmd)
	return spawn(cmd)
}
