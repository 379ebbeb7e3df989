//go:build !unix

package world

// lockDir is a no-op where flock(2) does not exist: one writer per store
// directory there.
func lockDir(string) (func(), error) { return func() {}, nil }
