package shareddir

import (
	"fmt"
	"io"
	"path/filepath"
)

// Mutants switches this backend's decisions to deliberately broken ones,
// each breaking one rule. The zero value is the contract's backend. The
// real engine's test hooks (engine/server Hooks.SharedDir) and the
// simulator's mutants (sim.Mutant.SharedDirDecisions), which run this
// package over a simulated file system, set the same switch, so one broken
// decision runs in both.
type Mutants struct {
	// ReadWithoutClaim makes Receive read the entry's file in place
	// instead of claiming it by atomic rename: the file stays, so a second
	// consumer (or a replay of the reference) reads it again (breaks SU-1;
	// conformance su1-read-without-claim, sim read-without-claim).
	ReadWithoutClaim bool
}

// Receive is a consumer's receive of one entry: Claim (SU-1, SU-2), with
// its errors. Under m.ReadWithoutClaim (breaks SU-1) it reads the entry's
// file in place and decodes it, leaving it where it was: ErrGone (wrapping
// the read's error) when the file cannot be read.
func Receive(fsys FS, root, producerInstanceID, entryID string, rand io.Reader, maxBytes int64, m Mutants) (tensors []Tensor, metadata map[string]string, err error) {
	if !m.ReadWithoutClaim {
		return Claim(fsys, root, producerInstanceID, entryID, rand, maxBytes)
	}
	// The SU-1 mutant: no rename, nothing spent.
	if err := ValidateInstanceID(producerInstanceID); err != nil {
		return nil, nil, err
	}
	if err := ValidateEntryID(entryID); err != nil {
		return nil, nil, err
	}
	raw, err := fsys.ReadFile(filepath.Join(instanceDir(root, producerInstanceID), entryName(entryID)))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrGone, err)
	}
	return DecodeSafetensors(raw, 1<<20)
}
