package shareddir

import (
	"errors"
	"fmt"
	"io/fs"
)

// LoadProducerKey returns the 32-byte HMAC key of producer instance
// producerInstanceID under root, for a consumer verifying a reference.
//
// Errors: ErrBadName if the id is not a lowercase UUID (nothing touched);
// ErrUnknownProducer if the key file is missing, is not a regular file, is
// readable or writable by group or others (not 0600), or does not hold
// exactly 32 bytes; the file system's error otherwise.
func LoadProducerKey(fsys FS, root, producerInstanceID string) ([]byte, error) {
	if err := ValidateInstanceID(producerInstanceID); err != nil {
		return nil, err
	}
	p := join(instanceDir(root, producerInstanceID), keyFileName)
	info, err := fsys.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s", ErrUnknownProducer, producerInstanceID, keyFileName)
	}
	if err != nil {
		return nil, fmt.Errorf("shareddir: stat key of %s: %w", producerInstanceID, err)
	}
	switch {
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s of %s is not a regular file (mode %v)", ErrUnknownProducer, keyFileName, producerInstanceID, info.Mode())
	case info.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%w: %s of %s has mode %v, want 0600", ErrUnknownProducer, keyFileName, producerInstanceID, info.Mode().Perm())
	case info.Size() != keyBytes:
		return nil, fmt.Errorf("%w: %s of %s has %d bytes, want %d", ErrUnknownProducer, keyFileName, producerInstanceID, info.Size(), keyBytes)
	}
	key, err := fsys.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s of %s vanished", ErrUnknownProducer, keyFileName, producerInstanceID)
	}
	if err != nil {
		return nil, fmt.Errorf("shareddir: read key of %s: %w", producerInstanceID, err)
	}
	if len(key) != keyBytes {
		return nil, fmt.Errorf("%w: %s of %s has %d bytes, want %d", ErrUnknownProducer, keyFileName, producerInstanceID, len(key), keyBytes)
	}
	return key, nil
}
