package shareddir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Claim consumes entry entryID of producer instance producerInstanceID under
// root, on the consumer's side (shared-directory backend): it opens
// <entryID>.safetensors, checks it is a regular file of at most maxBytes
// bytes, renames it to .claimed-<entryID>-<16 hex> (suffix read from rand),
// reads it through the descriptor opened before the rename, deletes the
// claimed file and decodes it. The rename is the claim: across all threads
// and processes exactly one Claim or producer Dir.Remove of an entry wins
// (SU-1). Verify the reference (HMAC, expiry) before calling Claim; that is
// the handoff core's decision.
//
// Returns the tensors in data order (an encoder output is one F32 tensor of
// shape [rows, cols]) and the file's metadata.
//
// Errors, in the order they are checked:
//   - ErrBadName: an id is malformed (SU-4/SU-5); nothing is touched.
//   - ErrUnknownProducer: the producer instance directory does not exist.
//   - ErrGone: the entry is spent (consumed, released or expired; SU-2),
//     including losing the rename to another consumer or the producer.
//   - ErrBadSafetensors: the entry is not a regular file (a symlink, say);
//     nothing is consumed.
//   - ErrTooLarge: the entry exceeds maxBytes (L-5); nothing is consumed.
//   - after a won rename (the entry is spent whatever happens next):
//     ErrBadSafetensors if the content is corrupt, ErrCleanup if the
//     claimed file could not be deleted, both joined when both happen; a
//     read error. The claimed file is deleted in every case, unless that
//     delete is what failed. On ErrCleanup alone the entry was read and
//     decoded in full and the tensors and metadata ARE returned with the
//     error; the caller decides whether to use them, but must mark the
//     cleanup failure on its Health.
//
// rand must not be shared with other goroutines unless it is safe for
// concurrent use (crypto/rand.Reader is).
func Claim(fsys FS, root, producerInstanceID, entryID string, rand io.Reader, maxBytes int64) (tensors []Tensor, metadata map[string]string, err error) {
	if err := ValidateInstanceID(producerInstanceID); err != nil {
		return nil, nil, err
	}
	if err := ValidateEntryID(entryID); err != nil {
		return nil, nil, err
	}
	if fsys == nil || rand == nil || maxBytes <= 0 {
		return nil, nil, fmt.Errorf("shareddir: Claim needs a file system, a randomness source and maxBytes > 0 (got %d)", maxBytes)
	}
	entry, dir := instanceEntryPath(root, producerInstanceID, entryID)
	f, err := fsys.OpenFile(entry, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return nil, nil, openError(fsys, dir, entry, producerInstanceID, entryID, err)
	}
	data, err := claimOpened(fsys, f, dir, entry, entryID, rand, maxBytes)
	if data == nil {
		return nil, nil, err
	}
	// data != nil: read in full; err, if any, is the claimed file's cleanup.
	tensors, metadata, derr := decodeClaimed(data, entryID)
	if derr != nil {
		return nil, nil, errors.Join(err, derr)
	}
	return tensors, metadata, err
}

// claimOpened checks the open entry f, renames it to a claimed name, reads it
// through f, closes f and deletes the claimed file. It returns the bytes
// (non-nil) if it read the whole file, with the cleanup error if any; or nil
// and the first error.
func claimOpened(fsys FS, f File, dir, entry, entryID string, rand io.Reader, maxBytes int64) (data []byte, err error) {
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shareddir: stat entry %s: %w", entryID, err)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: entry %s is not a regular file (mode %v); not consumed", ErrBadSafetensors, entryID, info.Mode())
	}
	size := info.Size()
	if size > maxBytes {
		f.Close()
		return nil, fmt.Errorf("%w: L-5 entry %s has %d bytes, bound %d; not consumed", ErrTooLarge, entryID, size, maxBytes)
	}
	if bug := claimBug.Load(); bug != int32(ClaimBugNone) { // a planted bug (export_sim.go)
		if bug == int32(ClaimBugCopy) {
			return plantedCopy(f, entryID, size)
		}
		return plantedDelete(fsys, f, entry, entryID, size)
	}
	// The read buffer: one byte more than the file, so the read after it
	// must find none (a separate buffer would be an allocation of its
	// own). A small entry's is made before the rename, with room after
	// that byte for the random bytes of the claimed name, which would
	// otherwise be an allocation of their own (the reader keeps its
	// argument as far as the compiler knows); a lost rename then wastes
	// only a small buffer. A large entry's is made once the rename won.
	var buf, raw []byte
	if size <= maxEarlyClaimBuf {
		buf = make([]byte, size+1+randSuffixHex/2)
		buf, raw = buf[:size+1], buf[size+1:]
	} else {
		raw = make([]byte, randSuffixHex/2)
	}
	var hexBuf [randSuffixHex]byte
	suffix, err := appendRandHex(hexBuf[:0], rand, raw)
	if err != nil {
		f.Close()
		return nil, err
	}
	claimed := claimedPath(dir, entryID, suffix)
	if err := fsys.Rename(entry, claimed); err != nil {
		f.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: SU-2 entry %s was claimed, released or expired first", ErrGone, entryID)
		}
		return nil, fmt.Errorf("shareddir: claim entry %s: %w", entryID, err)
	}
	// Won (SU-1): from here on the entry is spent, and the claimed file is
	// deleted whatever happens.
	if buf == nil {
		buf = make([]byte, size+1)
	}
	data = buf[:size:size]
	_, rerr := io.ReadFull(f, data)
	if rerr == nil {
		if n, _ := f.Read(buf[size:]); n > 0 {
			rerr = fmt.Errorf("%w: entry %s grew past its %d bytes while being read", ErrBadSafetensors, entryID, size)
		}
	} else if errors.Is(rerr, io.ErrUnexpectedEOF) || errors.Is(rerr, io.EOF) {
		rerr = fmt.Errorf("%w: entry %s shrank below its %d bytes while being read", ErrBadSafetensors, entryID, size)
	} else {
		rerr = fmt.Errorf("shareddir: read claimed entry %s: %w", entryID, rerr)
	}
	if cerr := f.Close(); cerr != nil && rerr == nil {
		rerr = fmt.Errorf("shareddir: close claimed entry %s: %w", entryID, cerr)
	}
	cleanupErr := removeFile(fsys, claimed)
	if rerr != nil {
		return nil, errors.Join(cleanupErr, rerr)
	}
	return data, cleanupErr
}

// maxEarlyClaimBuf bounds the entries whose read buffer claimOpened makes
// before its rename.
const maxEarlyClaimBuf = 64 << 10

// openError classifies a failed open of an entry file.
func openError(fsys FS, dir, entry, producerInstanceID, entryID string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := fsys.Lstat(dir); errors.Is(derr, fs.ErrNotExist) {
			return fmt.Errorf("%w: SU-2 producer instance %s has no directory", ErrUnknownProducer, producerInstanceID)
		}
		return fmt.Errorf("%w: SU-2 entry %s is not published", ErrGone, entryID)
	}
	if info, lerr := fsys.Lstat(entry); lerr == nil && !info.Mode().IsRegular() {
		return fmt.Errorf("%w: entry %s is not a regular file (mode %v); not consumed", ErrBadSafetensors, entryID, info.Mode())
	}
	return fmt.Errorf("shareddir: open entry %s: %w", entryID, err)
}

// decodeClaimed decodes a claimed entry's bytes.
func decodeClaimed(data []byte, entryID string) ([]Tensor, map[string]string, error) {
	tensors, metadata, err := DecodeSafetensors(data, DefaultMaxHeaderBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("entry %s (consumed): %w", entryID, err)
	}
	return tensors, metadata, nil
}
