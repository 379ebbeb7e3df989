package shareddir

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
)

// Remove releases entryID (Abort, expiry, drain): it renames
// <entryID>.safetensors to .claimed-<entryID>-<16 hex> and deletes that.
// The rename decides (SU-1): removed is true if this call took the entry, and
// false with a nil error if the entry was already gone (a consumer claimed
// it, or it was released or collected): SU-3 ALREADY_FINISHED.
//
// Errors: ErrBadName (nothing touched); fs.ErrClosed after Close; ErrCleanup
// if the rename failed for another reason (removed=false, the entry is
// still there) or the delete after a won rename failed (removed=true: the
// entry is released, but a file is left).
func (d *Dir) Remove(entryID string) (removed bool, err error) {
	if err := ValidateEntryID(entryID); err != nil {
		return false, err
	}
	if err := d.checkOpen(); err != nil {
		return false, err
	}
	return d.remove(entryID)
}

// remove is Remove without the checks (Close releases through it).
func (d *Dir) remove(entryID string) (bool, error) {
	var hexBuf [randSuffixHex]byte
	suffix, err := d.suffixNoCheck(hexBuf[:0])
	if err != nil {
		return false, err
	}
	claimed := claimedPath(d.dir, entryID, suffix)
	entry, _ := d.entryPath(entryID, false)
	if err := d.fsys.Rename(entry, claimed); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			d.forgetPath(entryID)
			return false, nil
		}
		return false, fmt.Errorf("%w: X-1 release entry %s: %w", ErrCleanup, entryID, err)
	}
	d.forgetPath(entryID)
	return true, removeFile(d.fsys, claimed)
}

// Exists reports whether <entryID>.safetensors is present, i.e. the entry is
// still published (not claimed, released or collected). A producer that finds
// a published entry missing learns that a consumer claimed it (handoff
// ObserveGone). Errors: ErrBadName (nothing touched); fs.ErrClosed after
// Close; the file system's error other than "not found".
func (d *Dir) Exists(entryID string) (bool, error) {
	if err := ValidateEntryID(entryID); err != nil {
		return false, err
	}
	entry, err := d.entryPath(entryID, true)
	if err != nil {
		return false, err
	}
	ok, err := exists(d.fsys, entry)
	if err != nil {
		return false, fmt.Errorf("shareddir: stat entry %s: %w", entryID, err)
	}
	if !ok {
		d.forgetPath(entryID)
	}
	return ok, nil
}

// List returns the ids of the entries present (<entryID>.safetensors files),
// sorted; temp, claimed and other files are ignored. Errors: fs.ErrClosed
// after Close; the file system's error.
func (d *Dir) List() ([]string, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return d.list()
}

// list is List without the closed check.
func (d *Dir) list() ([]string, error) {
	des, err := d.fsys.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("shareddir: list %s: %w", d.dir, err)
	}
	var ids []string
	for _, de := range des {
		if id, ok := entryIDFromName(de.Name()); ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// EntryExists reports whether a producer's entry is still in place (not
// claimed, released or expired): a consumer's look before it reserves receive
// bytes, so a spent reference is answered SU-2 before L-5, the contract's
// precedence. The entry may still be claimed by someone else right after;
// Claim decides. Errors: ErrBadName for malformed ids; the file system's
// error other than "does not exist".
func EntryExists(fsys FS, root, producerInstanceID, entryID string) (bool, error) {
	if err := ValidateInstanceID(producerInstanceID); err != nil {
		return false, err
	}
	if err := ValidateEntryID(entryID); err != nil {
		return false, err
	}
	entry, _ := instanceEntryPath(root, producerInstanceID, entryID)
	return exists(fsys, entry)
}
