package shareddir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// Write publishes entryID: it encodes tensors and metadata as safetensors,
// writes them to .tmp-<entryID>-<16 hex> (0600), fsyncs the file, renames it
// to <entryID>.safetensors and fsyncs the directory. Nothing partial is ever
// visible under the final name (L-5: a failed publish publishes nothing), and
// on failure the temp file is removed. It returns the file size in bytes.
// Call it only after the producer table reserved the bytes (L-5 quota is the
// table's decision).
//
// Errors: ErrBadName (nothing touched); ErrBadSafetensors for unencodable
// tensors (nothing touched); an error wrapping fs.ErrExist if the entry
// already exists (ids are 128 random bits, so this is a caller bug, SU-6);
// an error wrapping fs.ErrClosed after Close; the file system's error (e.g.
// syscall.ENOSPC), joined with ErrCleanup if the temp file could not be removed.
func (d *Dir) Write(entryID string, tensors []Tensor, metadata map[string]string) (fileBytes int64, err error) {
	if err := ValidateEntryID(entryID); err != nil {
		return 0, err
	}
	// The file is encoded in a pooled buffer: nothing keeps it past the
	// file's Write (io.Writer must not retain it), and a publish is the
	// simulator's most frequent write.
	bp := encodeBufs.Get().(*[]byte)
	b, err := appendSafetensors(*bp, tensors, metadata)
	defer func() {
		if b == nil { // not encoded: the buffer is as it was
			encodeBufs.Put(bp)
		} else if cap(b) <= maxPooledEncode {
			*bp = b[:0]
			encodeBufs.Put(bp)
		}
	}()
	if err != nil {
		return 0, err
	}
	var hexBuf [randSuffixHex]byte
	suffix, err := d.randSuffix(hexBuf[:0])
	if err != nil {
		return 0, err
	}
	// The paths in one allocation: a publish is the simulator's most
	// frequent write. final and tmp are their last elements.
	finalPath, final, tmpPath, tmp := writePaths(d.dir, entryID, suffix)
	if ok, err := exists(d.fsys, finalPath); err != nil {
		return 0, fmt.Errorf("shareddir: stat entry %s: %w", entryID, err)
	} else if ok {
		return 0, fmt.Errorf("shareddir: SU-6 entry %s: %w", entryID, fs.ErrExist)
	}
	if err := writeFilePaths(d.fsys, d.dir, tmpPath, finalPath, tmp, final, b); err != nil {
		var synced *dirSyncError
		if errors.As(err, &synced) {
			// Renamed but not durable: take it back so the table and the
			// directory agree that nothing was published.
			_, rerr := d.remove(entryID)
			return 0, errors.Join(err, rerr)
		}
		return 0, err
	}
	d.rememberPath(entryID, finalPath)
	return int64(len(b)), nil
}

// encodeBufs are Dir.Write's buffers for encoding an entry; one that grew
// past maxPooledEncode (a large entry) is left to the garbage collector.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledEncode bounds the buffers encodeBufs keeps.
const maxPooledEncode = 64 << 10

// dirSyncError is a failed fsync of the directory after the rename: the file
// is visible under its final name.
type dirSyncError struct{ err error }

func (e *dirSyncError) Error() string {
	return "shareddir: fsync directory after rename: " + e.err.Error()
}
func (e *dirSyncError) Unwrap() error { return e.err }

// writeFilePaths writes data to tmpPath, join(dir, tmp) (created
// exclusively, 0600), fsyncs it, renames it to finalPath, join(dir, final),
// and fsyncs dir. Before the rename any failure removes tmp (a failed
// removal is joined as ErrCleanup); a failed directory fsync after the
// rename is a *dirSyncError.
func writeFilePaths(fsys FS, dir, tmpPath, finalPath, tmp, final string, data []byte) (err error) {
	f, err := fsys.OpenFile(tmpPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return fmt.Errorf("shareddir: create %s: %w", tmpPath, err)
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			err = errors.Join(err, removeFile(fsys, tmpPath))
		}
	}()
	if err := fsys.Chmod(tmpPath, filePerm); err != nil {
		f.Close()
		return fmt.Errorf("shareddir: chmod %s 0600: %w", tmpPath, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("shareddir: write %s: %w", tmpPath, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("shareddir: fsync %s: %w", tmpPath, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("shareddir: close %s: %w", tmpPath, err)
	}
	if err := fsys.Rename(tmpPath, finalPath); err != nil {
		return fmt.Errorf("shareddir: rename %s to %s: %w", tmp, final, err)
	}
	renamed = true
	if err := fsys.SyncDir(dir); err != nil {
		return &dirSyncError{err}
	}
	return nil
}

// removeFile deletes path; a file that is already gone is fine, any
// other failure wraps ErrCleanup.
func removeFile(fsys FS, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: X-1 remove %s: %w", ErrCleanup, path, err)
	}
	return nil
}
