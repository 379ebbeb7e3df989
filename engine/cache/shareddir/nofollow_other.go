//go:build !unix

package shareddir

// oNoFollow is 0 where the platform has no O_NOFOLLOW; Claim still rejects
// anything but a regular file after opening it.
const oNoFollow = 0
