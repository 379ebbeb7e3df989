package server

import (
	"log/slog"

	"github.com/baton-dev/baton/engine/cache/shareddir"
)

// entryStore holds a producer's published entries for one backend. The
// producer table decides; the store only does the I/O it is told to.
type entryStore interface {
	// backend is the EncoderCacheRef.backend name of references to this store.
	backend() string
	// key is the producer instance's HMAC key for its references (SU-5).
	key() []byte
	// write makes an entry durable and visible under its id.
	write(id string, tensors []shareddir.Tensor, meta map[string]string) error
	// keepsTensors reports whether write keeps the tensors' bytes as the
	// entry's memory (then they must be the entry's own); otherwise write
	// copies them out before it returns (a file, a device upload).
	keepsTensors() bool
	// remove takes an entry's storage; won is false when it was already gone
	// (a consumer claimed it first).
	remove(id string) (won bool, err error)
	// exists reports whether the entry's storage is still there (a consumer
	// may claim it behind the producer's back: shared directory).
	exists(id string) (bool, error)
	// collect removes stale leftovers (temp files); nowMs is wall-clock ms.
	collect(nowMs int64) error
	// close removes everything the store holds (S-4).
	close() error
}

// sharedDirStore is the shared-directory backend: safetensors files that
// consumers claim by atomic rename.
type sharedDirStore struct {
	dir       *shareddir.Dir
	log       *slog.Logger // sweep failures: another instance's, not this one's cleanup (no X-1)
	skipSweep bool         // Hooks.SkipDeadInstanceSweep
}

func (s sharedDirStore) backend() string { return BackendSharedDir }
func (s sharedDirStore) key() []byte     { return s.dir.Key() }
func (s sharedDirStore) write(id string, tensors []shareddir.Tensor, meta map[string]string) error {
	_, err := s.dir.Write(id, tensors, meta)
	return err
}
func (s sharedDirStore) keepsTensors() bool             { return false }
func (s sharedDirStore) remove(id string) (bool, error) { return s.dir.Remove(id) }
func (s sharedDirStore) exists(id string) (bool, error) { return s.dir.Exists(id) }
func (s sharedDirStore) collect(nowMs int64) error {
	_, swept, err := s.dir.Collect(nowMs, s.skipSweep)
	s.logSweep(swept)
	return err
}

// logSweep logs what a sweep of dead producers' instance directories did
// (shareddir.StartProducer, Dir.Collect). Failures there concern another
// instance and never change this one's Health.
func (s sharedDirStore) logSweep(swept shareddir.Swept) {
	if swept.Err != nil {
		s.log.Warn("removing dead producer instance directories", "removed", swept.Removed, "err", swept.Err)
	} else if swept.Removed > 0 {
		s.log.Info("removed dead producer instance directories", "removed", swept.Removed)
	}
}
func (s sharedDirStore) close() error { return s.dir.Close(true) }
