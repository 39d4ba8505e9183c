package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a server process this tool started; it is stopped by its pid only.
type proc struct {
	cmd *exec.Cmd
	log string
}

// start runs name with args, its output in dir/<label>.log; as, when not "", is the user
// it runs as (PostgreSQL refuses to run as root).
func start(dir, label, as, name string, args ...string) (*proc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, label+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if as != "" {
		if err := runAs(cmd, as); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w (is it installed? see README.md)", name, err)
	}
	f.Close()
	return &proc{cmd: cmd, log: logPath}, nil
}

func runAs(cmd *exec.Cmd, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return nil
}

// stopAll stops ps one after the other, in order.
func stopAll(ps []*proc) {
	for _, p := range ps {
		p.stop()
	}
}

// stop ends the process it started: SIGTERM, then SIGKILL after 10 s.
func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// waitLog waits until the process's log has a line containing want.
func (p *proc) waitLog(ctx context.Context, want string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if b, _ := os.ReadFile(p.log); strings.Contains(string(b), want) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(p.log)
	return fmt.Errorf("%q not in %s after %v:\n%s", want, p.log, d, tail(string(b)))
}

// waitPort waits until addr accepts connections.
func waitPort(ctx context.Context, addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not listening after %v", addr, d)
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n loopback ports free right now.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// run runs a command to completion in dir.
func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
	}
	return nil
}

// treeCPU is the CPU time, user and system, used so far by the processes of ps and
// every process below them (PostgreSQL's backends, which leave their parent's process
// group), as /proc shows it; elsewhere it is 0. A process that ended is not counted.
func treeCPU(ps []*proc) time.Duration {
	roots := map[int]bool{}
	for _, p := range ps {
		if p != nil && p.cmd.Process != nil {
			roots[p.cmd.Process.Pid] = true
		}
	}
	type stat struct {
		ppid  int
		ticks int64
	}
	all := map[int]stat{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, t, ok := procStat("/proc/" + e.Name() + "/stat"); ok {
			all[pid] = stat{ppid, t}
		}
	}
	var ticks int64
	for pid, st := range all {
		for p, hops := pid, 0; p > 1 && hops < 64; p, hops = all[p].ppid, hops+1 {
			if roots[p] {
				ticks += st.ticks
				break
			}
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// selfCPU is this process's CPU time so far, user and system.
func selfCPU() time.Duration {
	_, t, _ := procStat("/proc/self/stat")
	return time.Duration(t) * time.Second / clockTicks
}

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTicks = 100

// procStat reads a process's parent and its utime+stime in clock ticks.
func procStat(path string) (ppid int, ticks int64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // state, ppid, pgrp, ..., utime (f[11]), stime (f[12])
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ppid, u + st, true
}
