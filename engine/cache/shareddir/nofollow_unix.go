//go:build unix

package shareddir

import "syscall"

// oNoFollow makes opening an entry fail on a symbolic link (ELOOP), so a
// planted link can never make a consumer read a file outside the cache.
const oNoFollow = syscall.O_NOFOLLOW
