package shareddir

import (
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"
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
	if len(id) != instanceIDLen {
		return fmt.Errorf("%w: SU-5 producer instance id %.40q is not a lowercase UUID", ErrBadName, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return fmt.Errorf("%w: SU-5 producer instance id %.40q is not a lowercase UUID", ErrBadName, id)
			}
		default:
			if !isLowerHex(c) {
				return fmt.Errorf("%w: SU-5 producer instance id %.40q is not a lowercase UUID", ErrBadName, id)
			}
		}
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

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

func allLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLowerHex(s[i]) {
			return false
		}
	}
	return true
}

// randHex reads n bytes from rand and returns 2n lowercase hex digits.
func randHex(rand io.Reader, n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", fmt.Errorf("shareddir: read randomness: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// instanceDir is <root>/<id>; id must have been validated.
func instanceDir(root, instanceID string) string { return filepath.Join(root, instanceID) }

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
