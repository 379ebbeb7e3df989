//go:build unix && !linux

package target

import "syscall"

// setParentDeathSignal does nothing outside Linux.
func setParentDeathSignal(*syscall.SysProcAttr, bool) {}
