package shareddir

import "log/slog"

// Store is the shared-directory backend as a producer store
// (engine/cache.Store): safetensors files that consumers claim by atomic
// rename (CONTRACT SU-1).
type Store struct {
	Dir *Dir
	// Log gets the sweeps of dead producers' instance directories: another
	// instance's cleanup, never this one's (no X-1). Nil discards them.
	Log *slog.Logger
	// SkipSweep leaves dead instances' directories alone (a test hook:
	// Dir.Collect's skipSweep).
	SkipSweep bool
}

// Backend is "shared_dir" (cache.BackendSharedDir).
func (s Store) Backend() string { return "shared_dir" }

// Key is the instance's reference key (Dir.Key).
func (s Store) Key() []byte { return s.Dir.Key() }

// Write is Dir.Write.
func (s Store) Write(id string, tensors []Tensor, meta map[string]string) error {
	_, err := s.Dir.Write(id, tensors, meta)
	return err
}

// KeepsTensors: Write copies the bytes into the entry's file.
func (s Store) KeepsTensors() bool { return false }

// Remove is Dir.Remove.
func (s Store) Remove(id string) (bool, error) { return s.Dir.Remove(id) }

// Exists is Dir.Exists.
func (s Store) Exists(id string) (bool, error) { return s.Dir.Exists(id) }

// Collect is Dir.Collect (temp files older than the limit, dead instances'
// directories); what the sweep did is logged (LogSweep).
func (s Store) Collect(nowMs int64) error {
	_, swept, err := s.Dir.Collect(nowMs, s.SkipSweep)
	s.LogSweep(swept)
	return err
}

// LogSweep logs what a sweep of dead producers' instance directories did
// (StartProducer, Dir.Collect). Failures there concern another instance
// and never change this one's Health.
func (s Store) LogSweep(swept Swept) {
	log := s.Log
	if log == nil {
		log = discard
	}
	if swept.Err != nil {
		log.Warn("removing dead producer instance directories", "removed", swept.Removed, "err", swept.Err)
	} else if swept.Removed > 0 {
		log.Info("removed dead producer instance directories", "removed", swept.Removed)
	}
}

// discard is the logger of a Store without Log.
var discard = slog.New(slog.DiscardHandler)

// Close is Dir.Close(true): removes the instance's directory (S-4).
func (s Store) Close() error { return s.Dir.Close(true) }
