//go:build unix

package world

import (
	"errors"
	"os"
	"syscall"
)

// lockDir takes an exclusive flock(2) on path (created if missing) and
// returns its release: shards sharing a store directory write one at a time.
func lockDir(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing the descriptor releases the flock
}
