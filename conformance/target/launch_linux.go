package target

import "syscall"

// setParentDeathSignal asks Linux to send SIGTERM to the child when baton
// exits, so an interrupted run leaves no engine behind.
func setParentDeathSignal(a *syscall.SysProcAttr, on bool) {
	if on {
		a.Pdeathsig = syscall.SIGTERM
	}
}
