package shareddir

import (
	"fmt"
	"io"
	"sync/atomic"
	"testing"
)

// ClaimBug names a bug that a test can plant in Claim itself, so that the
// simulator (package sim, which runs this package's real Claim over a
// simulated file system) is shown to find a broken Claim, not only a broken
// model of it (issue #16).
type ClaimBug int32

// The bugs.
const (
	// ClaimBugNone: Claim as written.
	ClaimBugNone ClaimBug = iota
	// ClaimBugCopy: Claim reads the entry through its descriptor and
	// returns it WITHOUT the claiming rename, leaving the entry in place,
	// so a second consumer consumes it again (breaks SU-1).
	ClaimBugCopy
	// ClaimBugUncheckedDelete: Claim deletes the entry (remove, its "not
	// found" ignored) instead of renaming it, and reads it through the
	// descriptor opened before: two Claims that both opened the entry
	// before either deleted it both return it (breaks SU-1 only under an
	// interleaving; run one after the other, the second open fails).
	ClaimBugUncheckedDelete
)

// claimBug is the planted bug (a ClaimBug); ClaimBugNone unless a test
// binary planted one with PlantClaimBugForTest.
var claimBug atomic.Int32

// PlantClaimBugForTest plants bug in Claim for every caller in the process
// until restore is called. It panics outside a test binary (testing.Testing
// is false in every binary `go build` makes, baton included), so no
// production build, configuration or flag can turn a bug on: only a
// `go test` binary that calls this function does.
func PlantClaimBugForTest(bug ClaimBug) (restore func()) {
	if !testing.Testing() {
		panic("shareddir: PlantClaimBugForTest called outside a test binary")
	}
	old := claimBug.Swap(int32(bug))
	return func() { claimBug.Store(old) }
}

// plantedDelete is ClaimBugUncheckedDelete's Claim after the checks on the
// open entry f: delete the entry without checking that this call did it,
// then read it through f.
func plantedDelete(fsys FS, f File, entry, entryID string, size int64) ([]byte, error) {
	_ = fsys.Remove(entry)
	return plantedCopy(f, entryID, size)
}

// plantedCopy is ClaimBugCopy's Claim after the checks on the open entry f:
// read it in full and leave it where it is.
func plantedCopy(f File, entryID string, size int64) ([]byte, error) {
	defer f.Close()
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("shareddir: read entry %s: %w", entryID, err)
	}
	return data, nil
}
