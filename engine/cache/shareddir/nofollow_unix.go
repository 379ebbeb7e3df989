//go:build unix

package shareddir

import "syscall"

// oNoFollow makes opening an entry fail on a symbolic link (ELOOP), so a
// planted link can never make a consumer read a file outside the cache, and
// opens without blocking, so a FIFO planted under an entry's name cannot hang
// the consumer in open(2) (the regular-file check then rejects it).
const oNoFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
