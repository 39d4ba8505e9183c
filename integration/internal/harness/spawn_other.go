//go:build unix && !linux

package harness

import "os/exec"

func spawn(cmd *exec.Cmd) error { return cmd.Start() }

func setDeathSignal(*exec.Cmd) {}
