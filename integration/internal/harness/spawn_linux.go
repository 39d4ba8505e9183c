//go:build linux

package harness

import (
	"os/exec"
	"runtime"
	"syscall"
)

// On Linux every server process gets SIGKILL when the test process dies (Pdeathsig), so a
// test killed by `go test -timeout` leaves no server behind. Pdeathsig fires when the
// parent *thread* exits, so processes are started from one goroutine locked to one OS
// thread that never exits.

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var spawnCh = make(chan spawnReq)

func init() {
	go func() {
		runtime.LockOSThread() // never unlocked: this thread lives as long as the process
		for r := range spawnCh {
			r.done <- r.cmd.Start()
		}
	}()
}

func spawn(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, done: done}
	return <-done
}

func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
