package shareddir

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/baton-dev/baton/engine/internal/lowerhex"
)

// File names inside a producer instance directory (see the package doc).
const (
	keyFileName    = "hmac.key"
	lockFileName   = "lock"
	entrySuffix    = ".safetensors"
	tmpPrefix      = ".tmp-"
	claimedPrefix  = ".claimed-"
	keyTmpInfix    = "key"
	lockTmpInfix   = "lock"
	randSuffixHex  = 16 // hex digits of the random suffix of temp and claimed names (64 bits)
	entryIDHex     = 32 // hex digits of an entry id (128 bits, SU-5)
	keyBytes       = 32 // bytes of the per-instance HMAC key
	instanceIDLen  = 36 // 8-4-4-4-12 hex digits and 4 dashes
	dirPerm        = 0o700
	filePerm       = 0o600
	maxKeyFileSize = 4096 // bytes read at most when loading hmac.key
)

// ValidateInstanceID returns nil if id is a lowercase UUID string
// (^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$), else an
// error wrapping ErrBadName (CONTRACT SU-5).
func ValidateInstanceID(id string) error {
	if len(id) != instanceIDLen || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' ||
		!allLowerHex(id[0:8]) || !allLowerHex(id[9:13]) || !allLowerHex(id[14:18]) || !allLowerHex(id[19:23]) || !allLowerHex(id[24:]) {
		return fmt.Errorf("%w: SU-5 producer instance id %.40q is not a lowercase UUID", ErrBadName, id)
	}
	return nil
}

// ValidateEntryID returns nil if id is exactly 32 lowercase hex digits (128
// random bits, CONTRACT SU-5), else an error wrapping ErrBadName.
func ValidateEntryID(id string) error {
	if len(id) != entryIDHex || !allLowerHex(id) {
		return fmt.Errorf("%w: SU-5 entry id %.40q is not 32 lowercase hex digits", ErrBadName, id)
	}
	return nil
}

// NewEntryID reads 16 bytes (128 bits, SU-5) from rand and returns them as 32
// lowercase hex digits. Pass crypto/rand.Reader in the engine.
func NewEntryID(rand io.Reader) (string, error) {
	return randHex(rand, entryIDHex/2)
}

func allLowerHex(s string) bool { return lowerhex.Is(s) }

// randHex reads n bytes from rand and returns 2n lowercase hex digits.
func randHex(rand io.Reader, n int) (string, error) {
	return randHexInto(rand, make([]byte, n))
}

// randHexInto is randHex reading into b (len(b) bytes).
func randHexInto(rand io.Reader, b []byte) (string, error) {
	var x [64]byte // hex.EncodeToString in one allocation for the usual sizes
	if 2*len(b) > len(x) {
		if _, err := io.ReadFull(rand, b); err != nil {
			return "", fmt.Errorf("shareddir: read randomness: %w", err)
		}
		return hex.EncodeToString(b), nil
	}
	h, err := appendRandHex(x[:0], rand, b)
	if err != nil {
		return "", err
	}
	return string(h), nil
}

// appendRandHex reads len(b) bytes from rand into b and appends them to dst
// as 2*len(b) lowercase hex digits. With dst on the caller's stack a name
// built from the digits (tempPath, claimedPath) costs one allocation, not two.
func appendRandHex(dst []byte, rand io.Reader, b []byte) ([]byte, error) {
	if _, err := io.ReadFull(rand, b); err != nil {
		return dst, fmt.Errorf("shareddir: read randomness: %w", err)
	}
	return hex.AppendEncode(dst, b), nil
}

// tempPath is join(dir, tmpPrefix+infix+"-"+suffix) and its last element,
// in one allocation when dir joins plainly (a publish is the simulator's
// most frequent write).
func tempPath(dir, infix string, suffix []byte) (path, name string) {
	if joinsPlain(dir) {
		path = dir + string(filepath.Separator) + tmpPrefix + infix + "-" + string(suffix)
		return path, path[len(dir)+1:]
	}
	name = tmpPrefix + infix + "-" + string(suffix)
	return join(dir, name), name
}

// writePaths is entryPath(dir, entryID) and tempPath(dir, entryID,
// suffix), with their last elements, all in one allocation when dir joins
// plainly (Dir.Write: a publish is the simulator's most frequent write;
// issue #16); entryID must have been validated.
func writePaths(dir, entryID string, suffix []byte) (finalPath, final, tmpPath, tmp string) {
	if !joinsPlain(dir) {
		finalPath = entryPath(dir, entryID)
		tmpPath, tmp = tempPath(dir, entryID, suffix)
		return finalPath, finalPath[len(finalPath)-len(entryID)-len(entrySuffix):], tmpPath, tmp
	}
	s := dir + string(filepath.Separator) + entryID + entrySuffix + dir + string(filepath.Separator) + tmpPrefix + entryID + "-" + string(suffix)
	n := len(dir) + 1 + len(entryID) + len(entrySuffix)
	finalPath, tmpPath = s[:n], s[n:]
	return finalPath, finalPath[len(dir)+1:], tmpPath, tmpPath[len(dir)+1:]
}

// tempFinalPaths is join(dir, final) and tempPath(dir, infix, suffix),
// both in one allocation when dir joins plainly and final is one plain
// element (a producer's lock and key: every start makes both).
func tempFinalPaths(dir, final, infix string, suffix []byte) (finalPath, tmpPath, tmp string) {
	if !joinsPlain(dir) || !isElement(final) {
		tmpPath, tmp = tempPath(dir, infix, suffix)
		return join(dir, final), tmpPath, tmp
	}
	s := dir + string(filepath.Separator) + final + dir + string(filepath.Separator) + tmpPrefix + infix + "-" + string(suffix)
	n := len(dir) + 1 + len(final)
	finalPath, tmpPath = s[:n], s[n:]
	return finalPath, tmpPath, tmpPath[len(dir)+1:]
}

// claimedPath is join(dir, claimedPrefix+entryID+"-"+suffix), in one
// allocation when dir joins plainly; entryID must have been validated.
func claimedPath(dir, entryID string, suffix []byte) string {
	if joinsPlain(dir) {
		return dir + string(filepath.Separator) + claimedPrefix + entryID + "-" + string(suffix)
	}
	return join(dir, claimedPrefix+entryID+"-"+string(suffix))
}

// instanceDir is <root>/<id>, filepath.Join(root, instanceID); id must
// have been validated (one element: no separator, not "." or "..").
func instanceDir(root, instanceID string) string {
	if isCleanDir(root) {
		return root + string(filepath.Separator) + instanceID
	}
	return filepath.Join(root, instanceID)
}

// join is filepath.Join(dir, name) for a dir formed by instanceDir or
// filepath.Join (so clean: every dir this package joins under is), without
// Join's cleaning pass (each shared-directory operation joins a path; the
// simulator runs millions). A name that is not one plain element, or a
// dir that Join would change, goes through filepath.Join.
func join(dir, name string) string {
	if !isElement(name) || !joinsPlain(dir) {
		return filepath.Join(dir, name)
	}
	return dir + string(filepath.Separator) + name
}

// entryPath is join(dir, entryName(entryID)) in one allocation; entryID
// must have been validated.
func entryPath(dir, entryID string) string {
	if !joinsPlain(dir) {
		return filepath.Join(dir, entryName(entryID))
	}
	return dir + string(filepath.Separator) + entryID + entrySuffix
}

// isElement reports whether name is one path element that filepath.Join
// appends unchanged: not empty, no separator, not "." or "..".
func isElement(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	if filepath.Separator == '/' {
		return strings.IndexByte(name, '/') < 0
	}
	for i := 0; i < len(name); i++ {
		if os.IsPathSeparator(name[i]) {
			return false
		}
	}
	return true
}

// joinsPlain reports whether a clean dir joins an element with one
// separator: it is not "" or "." (Join drops them), does not end in a
// separator (the root: Join adds none) and is not a bare volume name
// (Windows: Join("C:", x) is "C:x").
func joinsPlain(dir string) bool {
	return dir != "" && dir != "." && !os.IsPathSeparator(dir[len(dir)-1]) && len(filepath.VolumeName(dir)) != len(dir)
}

// isCleanDir reports whether dir + separator + element is what
// filepath.Join(dir, element) returns for any dir (instanceDir's root, the
// caller's): dir joins plainly and is clean (filepath.Clean does not
// allocate for a clean path).
func isCleanDir(dir string) bool { return joinsPlain(dir) && filepath.Clean(dir) == dir }

// instanceEntryPath is entryPath(instanceDir(root, instanceID), entryID)
// and that directory, the path in one allocation when root is clean (a
// consumer's every look at and claim of an entry); ids must have been
// validated.
func instanceEntryPath(root, instanceID, entryID string) (entry, dir string) {
	if isCleanDir(root) {
		entry = root + string(filepath.Separator) + instanceID + string(filepath.Separator) + entryID + entrySuffix
		return entry, entry[:len(root)+1+len(instanceID)]
	}
	dir = instanceDir(root, instanceID)
	return entryPath(dir, entryID), dir
}

// entryName is <entryID>.safetensors; entryID must have been validated.
func entryName(entryID string) string { return entryID + entrySuffix }

// entryIDFromName returns the entry id of an entry file name, if it is one.
func entryIDFromName(name string) (string, bool) {
	id, ok := strings.CutSuffix(name, entrySuffix)
	if !ok || ValidateEntryID(id) != nil {
		return "", false
	}
	return id, true
}

// isOrphanCandidate reports whether name is a temp or claimed file this
// package creates: .tmp-<entryID|key|lock>-<16 hex> or .claimed-<entryID>-<16 hex>.
func isOrphanCandidate(name string) bool {
	var rest string
	var ok bool
	keyAllowed := false
	if rest, ok = strings.CutPrefix(name, tmpPrefix); ok {
		keyAllowed = true
	} else if rest, ok = strings.CutPrefix(name, claimedPrefix); !ok {
		return false
	}
	id, suffix, ok := strings.Cut(rest, "-")
	if !ok || len(suffix) != randSuffixHex || !allLowerHex(suffix) {
		return false
	}
	return ValidateEntryID(id) == nil || keyAllowed && (id == keyTmpInfix || id == lockTmpInfix)
}
