//go:build unix

package shareddir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// osLock is a flock(2)-held descriptor.
type osLock struct{ f *os.File }

func (l osLock) Close() error { return l.f.Close() } // closing the last descriptor releases the flock

// tryLock is OSFS.TryLock: open (or create), check it is a regular file,
// flock(LOCK_EX|LOCK_NB).
func tryLock(name string, create bool, perm fs.FileMode) (FileLock, error) {
	flag := os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	if create {
		flag = os.O_RDWR | os.O_CREATE | os.O_EXCL | syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("shareddir: lock %s is not a regular file (mode %v)", name, info.Mode())
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, name)
		}
		return nil, fmt.Errorf("shareddir: flock %s: %w", name, err)
	}
	return osLock{f}, nil
}
