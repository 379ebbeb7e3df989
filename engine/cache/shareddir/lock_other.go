//go:build !unix

package shareddir

import (
	"errors"
	"io/fs"
)

// tryLock needs flock(2); the shared-directory backend supports only unix
// hosts (producer and consumers on one host).
func tryLock(name string, create bool, perm fs.FileMode) (FileLock, error) {
	return nil, errors.New("shareddir: instance locks need flock(2) (unix only)")
}
