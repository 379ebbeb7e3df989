package world

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
)

// The failing-seed store (`baton sim --store DIR`, issue #17): every
// failing seed of a sweep is recorded with the commit it ran on, its
// mutant, its settings and its trace; `--replay-store DIR` re-runs every
// stored seed before a sweep (a regression gate). Layout:
//
//	DIR/
//	  <commit>/                  one directory per commit (BatonCommit: the git
//	                             revision, "-dirty" for a modified tree; "unknown"
//	                             for an unstamped build); characters outside
//	                             [0-9A-Za-z._-] become "_"
//	    lock                     flock(2)ed by a writer while it adds a record and
//	                             prunes, so shards on one volume can share DIR
//	    seed-<N>.json            the record of seed N (StoreRecord)
//	    seed-<N>.jsonl           its JSONL trace, the input of `baton sim replay`
//	                             (failing records only)
//	    seed-<N>+<mutant>.json   a run with a mutant (and .jsonl)
//
// Per commit the store keeps at most Keep records, ordered by TigerBeetle's
// merge rule (StoreLess): failing seeds before passing ones, then
// faster-failing (fewer events) before slower, then the lower seed. A new
// record that would rank after a full store's last is not written; a write
// that overflows the store removes its last records (and their traces).
// A stored seed that passes when replayed is recorded as passing for the
// replaying commit (its record says what was fixed where).

// StoreFormat is the format name every store record carries.
const StoreFormat = "baton-sim-seed-v1"

// DefaultStoreKeep is the records a store keeps per commit by default.
const DefaultStoreKeep = 256

// ErrBadStore marks a store directory or record that cannot be used.
var ErrBadStore = errors.New("sim: bad seed store")

// StoreRecord is one stored run (seed-<N>[+<mutant>].json).
type StoreRecord struct {
	Format   string   `json:"format"`
	Seed     uint64   `json:"seed"`
	Mutant   Mutant   `json:"mutant,omitempty"`
	Commit   string   `json:"commit"`
	Settings Settings `json:"settings"`
	// Verdict is VerdictName of the run's verdict; Rule and Failure what
	// the failing checker said.
	Verdict string `json:"verdict"`
	Rule    string `json:"rule,omitempty"`
	Failure string `json:"failure,omitempty"`
	// Events and Ticks are the run's steps and virtual ms.
	Events int64 `json:"events"`
	Ticks  int64 `json:"ticks"`
	// Trace is the trace file's name beside the record ("" for a passing run).
	Trace string `json:"trace,omitempty"`
	// Replay is the command that re-runs the seed.
	Replay string `json:"replay"`
}

// Failing reports whether the record is of a failing run.
func (r StoreRecord) Failing() bool { return r.Verdict != VerdictName(Passed) }

// StoreLess is the store's merge rule: failing before passing, then fewer
// events (faster failing) before more, then the lower seed, then the mutant.
func StoreLess(a, b StoreRecord) bool {
	if a.Failing() != b.Failing() {
		return a.Failing()
	}
	if a.Events != b.Events {
		return a.Events < b.Events
	}
	if a.Seed != b.Seed {
		return a.Seed < b.Seed
	}
	return a.Mutant < b.Mutant
}

// VerdictName is a verdict's name in results and store records: passed,
// correctness, liveness or crash.
func VerdictName(v Verdict) string {
	switch v {
	case Passed:
		return "passed"
	case Correctness:
		return "correctness"
	case Liveness:
		return "liveness"
	case Crash:
		return "crash"
	}
	return "verdict-" + strconv.Itoa(int(v))
}

// ParseVerdictName is VerdictName's inverse; ok is false for another name.
func ParseVerdictName(name string) (Verdict, bool) {
	for v := Passed; v <= Crash; v++ {
		if VerdictName(v) == name {
			return v, true
		}
	}
	return 0, false
}

// ParseStoreRecord decodes one record strictly: one JSON object, no
// unknown field, no trailing data, the store format, a known verdict and
// mutant, valid settings, a trace name of its own seed. Errors wrap ErrBadStore.
func ParseStoreRecord(raw []byte) (StoreRecord, error) {
	var r StoreRecord
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return StoreRecord{}, fmt.Errorf("%w: record: %v", ErrBadStore, err)
	}
	if dec.More() {
		return StoreRecord{}, fmt.Errorf("%w: record: trailing data", ErrBadStore)
	}
	if r.Format != StoreFormat {
		return StoreRecord{}, fmt.Errorf("%w: record format %q, want %q", ErrBadStore, r.Format, StoreFormat)
	}
	if _, ok := ParseVerdictName(r.Verdict); !ok {
		return StoreRecord{}, fmt.Errorf("%w: record verdict %q", ErrBadStore, r.Verdict)
	}
	if _, err := ParseMutant(string(r.Mutant)); err != nil {
		return StoreRecord{}, fmt.Errorf("%w: %v", ErrBadStore, err)
	}
	if err := r.Settings.Validate(); err != nil {
		return StoreRecord{}, fmt.Errorf("%w: %v", ErrBadStore, err)
	}
	if r.Events < 0 || r.Ticks < 0 {
		return StoreRecord{}, fmt.Errorf("%w: record has negative events or ticks", ErrBadStore)
	}
	if r.Trace != "" && r.Trace != storeName(r.Seed, r.Mutant)+".jsonl" {
		return StoreRecord{}, fmt.Errorf("%w: record of seed %d names trace %q", ErrBadStore, r.Seed, r.Trace)
	}
	return r, nil
}

// storeName is a run's file name without extension.
func storeName(seed uint64, m Mutant) string {
	name := "seed-" + strconv.FormatUint(seed, 10)
	if m != MutantNone {
		name += "+" + string(m)
	}
	return name
}

// CommitDirName is the directory name of commit in a store.
func CommitDirName(commit string) string {
	if commit == "" {
		return "unknown"
	}
	b := []byte(commit)
	for i, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if s := string(b); s != "." && s != ".." {
		return s
	}
	return "_"
}

// Store records runs into a store directory for one commit. Its methods
// are safe for concurrent use (one flock per write guards against other
// processes sharing the directory).
type Store struct {
	dir, commit string
	keep        int
	mu          sync.Mutex
	// kept is the commit's records as of the last write, in merge order.
	kept []StoreRecord
}

// OpenStore opens (creating it if needed) the store at dir for commit,
// keeping keep records per commit (0: DefaultStoreKeep). Errors: the
// directory cannot be created, or a record in it is malformed (named).
func OpenStore(dir, commit string, keep int) (*Store, error) {
	if keep <= 0 {
		keep = DefaultStoreKeep
	}
	s := &Store{dir: dir, commit: commit, keep: keep}
	if err := os.MkdirAll(s.CommitDir(), 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadStore, err)
	}
	recs, err := readCommitDir(s.CommitDir())
	if err != nil {
		return nil, err
	}
	s.kept = recs
	return s, nil
}

// CommitDir is the directory of the store's commit.
func (s *Store) CommitDir() string { return filepath.Join(s.dir, CommitDirName(s.commit)) }

// Record stores r for the store's commit: a failing run with its trace (a
// re-run with the trace on, which must reproduce r), a passing one without.
// It returns the record and whether it was kept (false: the store is full
// of records that rank before it). Errors: the re-run did not reproduce
// r, or the files could not be written.
func (s *Store) Record(r Result) (StoreRecord, bool, error) {
	rec := StoreRecord{Format: StoreFormat, Seed: r.Seed, Mutant: r.Mutant, Commit: s.commit, Settings: r.Settings,
		Verdict: VerdictName(r.Verdict), Rule: r.Rule, Failure: r.Failure, Events: r.Events, Ticks: r.Ticks, Replay: r.ReplayCommand()}
	s.mu.Lock()
	full := len(s.kept) >= s.keep && !StoreLess(rec, s.kept[len(s.kept)-1])
	s.mu.Unlock()
	if full {
		return rec, false, nil
	}
	name := storeName(r.Seed, r.Mutant)
	var trace []byte
	if rec.Failing() {
		var b bytes.Buffer
		again := Run(r.Seed, r.Settings, Options{Mutant: r.Mutant, Trace: &b})
		if again.Verdict != r.Verdict || again.Events != r.Events {
			return rec, false, fmt.Errorf("sim: seed %d did not reproduce for the store: %v after %d events, then %v after %d", r.Seed, r.Verdict, r.Events, again.Verdict, again.Events)
		}
		trace = b.Bytes()
		rec.Trace = name + ".jsonl"
	}
	raw, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return rec, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := lockDir(filepath.Join(s.CommitDir(), "lock"))
	if err != nil {
		return rec, false, fmt.Errorf("%w: %v", ErrBadStore, err)
	}
	defer unlock()
	dir := s.CommitDir()
	if trace != nil {
		if err := writeAtomic(filepath.Join(dir, rec.Trace), trace); err != nil {
			return rec, false, err
		}
	} else if err := os.Remove(filepath.Join(dir, name+".jsonl")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return rec, false, err
	}
	if err := writeAtomic(filepath.Join(dir, name+".json"), append(raw, '\n')); err != nil {
		return rec, false, err
	}
	kept, err := s.prune(rec)
	if err != nil {
		return rec, false, err
	}
	return rec, kept, nil
}

// prune re-reads the commit's records (other processes may have written
// some) and removes those past keep; it reports whether written survived.
func (s *Store) prune(written StoreRecord) (bool, error) {
	recs, err := readCommitDir(s.CommitDir())
	if err != nil {
		return false, err
	}
	for _, r := range recs[min(len(recs), s.keep):] {
		base := filepath.Join(s.CommitDir(), storeName(r.Seed, r.Mutant))
		for _, ext := range []string{".json", ".jsonl"} {
			if err := os.Remove(base + ext); err != nil && !errors.Is(err, os.ErrNotExist) {
				return false, err
			}
		}
	}
	s.kept = recs[:min(len(recs), s.keep)]
	for _, r := range s.kept {
		if r.Seed == written.Seed && r.Mutant == written.Mutant {
			return true, nil
		}
	}
	return false, nil
}

// readCommitDir reads one commit directory's records in merge order.
// Errors wrap ErrBadStore and name the file.
func readCommitDir(dir string) ([]StoreRecord, error) {
	names, err := filepath.Glob(filepath.Join(dir, "seed-*.json"))
	if err != nil {
		return nil, err
	}
	recs := make([]StoreRecord, 0, len(names))
	for _, path := range names {
		raw, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // pruned by another writer since the glob
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadStore, err)
		}
		rec, err := ParseStoreRecord(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if filepath.Base(path) != storeName(rec.Seed, rec.Mutant)+".json" {
			return nil, fmt.Errorf("%s: %w: the file holds seed %d mutant %q", path, ErrBadStore, rec.Seed, rec.Mutant)
		}
		recs = append(recs, rec)
	}
	sort.Slice(recs, func(i, j int) bool { return StoreLess(recs[i], recs[j]) })
	return recs, nil
}

// ReadStore reads every record of the store at dir, commit directory by
// commit directory (in name order), each in merge order. A missing dir is
// an empty store. Errors wrap ErrBadStore and name the file.
func ReadStore(dir string) ([]StoreRecord, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadStore, err)
	}
	var all []StoreRecord
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		recs, err := readCommitDir(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
	return all, nil
}

// ReplaySet is the runs a regression gate re-runs from recs: the records
// of mutant m, one per (seed, settings) (a seed stored by several commits
// runs once per distinct settings), failing ones' settings first, in seed order.
func ReplaySet(recs []StoreRecord, m Mutant) []StoreRecord {
	type key struct {
		seed     uint64
		settings string
	}
	best := map[key]StoreRecord{}
	for _, r := range recs {
		if r.Mutant != m {
			continue
		}
		b, _ := json.Marshal(r.Settings)
		k := key{r.Seed, string(b)}
		if old, ok := best[k]; !ok || StoreLess(r, old) {
			best[k] = r
		}
	}
	out := make([]StoreRecord, 0, len(best))
	for _, r := range best {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Seed != out[j].Seed {
			return out[i].Seed < out[j].Seed
		}
		if out[i].Failing() != out[j].Failing() {
			return out[i].Failing()
		}
		a, _ := json.Marshal(out[i].Settings)
		b, _ := json.Marshal(out[j].Settings)
		return string(a) < string(b)
	})
	return out
}

// StoreOwner is the shard of n that replays stored seed seed: a hash of
// the seed, so every shard of a sweep agrees and each stored seed is
// replayed once across them.
func StoreOwner(seed uint64, n int) int {
	if n <= 1 {
		return 0
	}
	return int(mix64(seed^determinismSalt<<1) % uint64(n))
}

// writeAtomic writes data to path through a temporary file and a rename.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
