//go:build unix

package target

import (
	"os/exec"
	"syscall"
)

// Signals Launched sends to the process groups it started.
const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// setProcessGroup starts cmd in a process group of its own, so a stop
// reaches every process a shell command spawned and a terminal's Ctrl-C
// reaches baton only; with dieWithBaton the group's leader gets SIGTERM
// (the engine's drain, CONTRACT S-1) if baton dies first (Linux only).
func setProcessGroup(cmd *exec.Cmd, dieWithBaton bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr, dieWithBaton)
}

// signalGroup sends sig to cmd's process group.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
