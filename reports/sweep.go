package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
)

// A sweep result is what one run of the simulator over a seed range (or
// one shard of it) writes with `baton sim --results FILE`, and what
// `baton report merge` adds up across shards (issue #17). The package
// knows nothing of the simulator: the fault sites, lifecycle points and
// sometimes states are names in the file, and the coverage gate is data
// (GateMinSeeds and the counts).

// SweepFormat is the format name every sweep result carries.
const SweepFormat = "baton-sim-sweep-v1"

// Worlds a sweep runs.
const (
	// SweepWorldHandoff is `baton sim`: the handoff lifecycle world.
	SweepWorldHandoff = "handoff"
	// SweepWorldExecutor is `baton sim executor`: the in-engine executor world.
	SweepWorldExecutor = "executor"
)

// Sweep verdicts, best to worst (WorseSweep). The run verdicts (passed,
// correctness, liveness, crash) count runs; nondeterministic is a sampled
// seed whose two runs differed; coverage is a sweep of at least
// GateMinSeeds seeds that missed a fault site or a sometimes state.
const (
	SweepPassed           = "passed"
	SweepCoverageGap      = "coverage"
	SweepLiveness         = "liveness"
	SweepNondeterministic = "nondeterministic"
	SweepCorrectness      = "correctness"
	SweepCrash            = "crash"
)

var sweepRank = map[string]int{SweepPassed: 0, SweepCoverageGap: 1, SweepLiveness: 2, SweepNondeterministic: 3, SweepCorrectness: 4, SweepCrash: 5}

// runVerdicts are the verdicts a run can have (the keys of Verdicts).
var runVerdicts = []string{SweepPassed, SweepCorrectness, SweepLiveness, SweepCrash}

// WorseSweep returns the worse of two sweep verdicts.
func WorseSweep(a, b string) string {
	if sweepRank[b] > sweepRank[a] {
		return b
	}
	return a
}

// ErrBadSweep marks a sweep result that cannot be read or merged.
var ErrBadSweep = errors.New("reports: bad sweep result")

// SeedRange is an inclusive range of seeds.
type SeedRange struct {
	From uint64 `json:"from"` // first seed
	To   uint64 `json:"to"`   // last seed, included
}

// Len is the number of seeds (0 when To < From).
func (r SeedRange) Len() uint64 {
	if r.To < r.From {
		return 0
	}
	return r.To - r.From + 1
}

// String renders the range as "From..To".
func (r SeedRange) String() string { return fmt.Sprintf("%d..%d", r.From, r.To) }

// ShardRef is a shard's place: Index in [0, Count).
type ShardRef struct {
	Index int `json:"index"` // 0-based, < Count
	Count int `json:"count"` // shards of the range, >= 1
}

// String renders the shard as "Index/Count".
func (s ShardRef) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// SweepResult is one sweep's (or one shard's, or a merge's) result.
type SweepResult struct {
	Format       string `json:"format"`           // SweepFormat
	World        string `json:"world"`            // SweepWorldHandoff or SweepWorldExecutor
	Commit       string `json:"commit"`           // the baton build's commit (UnstampedCommit if unstamped)
	BatonVersion string `json:"baton_version"`    // the baton build's version
	Mutant       string `json:"mutant,omitempty"` // the simulator mutant swept; "" for the contract's core
	// Range is the whole sweep's seeds; Shard this result's place in it;
	// Seeds this result's own block (nil: the block is empty, more shards
	// than seeds). A merge has Shard 0/1, Seeds = Range and MergedShards
	// the shard count it adds up.
	Range        SeedRange  `json:"range"`
	Shard        ShardRef   `json:"shard"`                   // this result's place in Range
	Seeds        *SeedRange `json:"seeds"`                   // this result's own block of Range; nil when empty
	MergedShards int        `json:"merged_shards,omitempty"` // shards a merge adds up; 0 for a shard
	// Runs is the seeds run; Verdicts counts them by run verdict.
	Runs     int64            `json:"runs"`
	Verdicts map[string]int64 `json:"verdicts"` // run verdict -> runs
	// Events and Ticks are summed over the runs (Ticks: virtual ms; 0 for the executor world).
	Events int64 `json:"events"`
	Ticks  int64 `json:"ticks"` // virtual ms
	// Failures are the failing runs with the lowest seeds, in seed order;
	// FailuresOmitted the failing runs not listed.
	Failures        []SweepFailure `json:"failures"`
	FailuresOmitted int64          `json:"failures_omitted"` // failing runs not in Failures
	// StoreReplay is the regression gate's re-run of stored seeds (--replay-store).
	StoreReplay *StoreReplay `json:"store_replay,omitempty"`
	Determinism Determinism  `json:"determinism"` // the sampled double runs
	// Coverage is the handoff world's coverage (nil for the executor world).
	Coverage *SweepCoverage `json:"coverage,omitempty"`
	// Verdict is the worst of everything above (Finish); Unreached what
	// the coverage gate found missing, when it applied.
	Verdict   string   `json:"verdict"`
	Unreached []string `json:"unreached,omitempty"` // what the coverage gate found missing
}

// SweepFailure is one failing run.
type SweepFailure struct {
	Seed    uint64 `json:"seed"`           // the failing run's seed
	Verdict string `json:"verdict"`        // its run verdict (SweepCorrectness, SweepLiveness, SweepCrash)
	Rule    string `json:"rule,omitempty"` // the CONTRACT rule the checker names, if any
	// Failure is the checker's message (its first line).
	Failure string `json:"failure"`
	Events  int64  `json:"events"` // events the run took
	// Replay is the command that re-runs the seed; Trace the failing run's
	// trace file when one was written (--trace-dir, --store).
	Replay string `json:"replay"`
	Trace  string `json:"trace,omitempty"` // the trace file, if one was written
}

// StoreReplay is the re-run of a seed store's seeds before the range.
type StoreReplay struct {
	Runs     int64            `json:"runs"`     // stored seeds re-run
	Verdicts map[string]int64 `json:"verdicts"` // run verdict -> runs
	Failures []SweepFailure   `json:"failures"` // the failing re-runs
}

// Determinism is the sampled double runs (one passing seed in OneIn).
type Determinism struct {
	OneIn       int64             `json:"one_in"`                // one passing seed in OneIn is run twice
	Sampled     int64             `json:"sampled"`               // seeds run twice
	Diverged    int64             `json:"diverged"`              // of those, seeds whose two runs differed
	Divergences []SweepDivergence `json:"divergences,omitempty"` // diverged seeds listed, at most Diverged
}

// SweepDivergence is a sampled seed whose two runs differed, with the
// files both runs' traces were kept in.
type SweepDivergence struct {
	Seed   uint64   `json:"seed"`             // the sampled seed
	Traces []string `json:"traces,omitempty"` // the two runs' trace files
}

// SweepCoverage is what a sweep's runs reached: every fault site (fires,
// seeds, fires per lifecycle point), the steps taken at every lifecycle
// point, and every sometimes state (hits, seeds).
type SweepCoverage struct {
	// GateMinSeeds is the sweep length from which the gate applies.
	GateMinSeeds int64                     `json:"gate_min_seeds"`
	Sites        map[string]SiteCount      `json:"sites"`     // fault site name -> its coverage
	Points       map[string]int64          `json:"points"`    // lifecycle point -> steps taken there
	Sometimes    map[string]SometimesCount `json:"sometimes"` // sometimes state name -> its coverage
}

// SiteCount is one fault site's coverage.
type SiteCount struct {
	Fired   int64            `json:"fired"`              // times the site fired, over all runs
	Seeds   int64            `json:"seeds"`              // runs in which it fired
	ByPoint map[string]int64 `json:"by_point,omitempty"` // fires per lifecycle point; they sum to Fired
}

// SometimesCount is one sometimes state's coverage.
type SometimesCount struct {
	Rule  string `json:"rule"`  // the CONTRACT rule it puts under test
	Text  string `json:"text"`  // what happens in that state
	Hits  int64  `json:"hits"`  // times it was reached, over all runs
	Seeds int64  `json:"seeds"` // runs in which it was reached
}

// GateApplies reports whether the coverage gate judges r: a handoff sweep
// of at least GateMinSeeds runs.
func (r *SweepResult) GateApplies() bool {
	return r.Coverage != nil && r.Coverage.GateMinSeeds > 0 && r.Runs >= r.Coverage.GateMinSeeds
}

// Finish computes Unreached (when the gate applies) and Verdict: the worst
// of the runs' verdicts, the store replay's, a divergence
// (nondeterministic) and the gate (coverage).
func (r *SweepResult) Finish() {
	r.Unreached = nil
	if r.GateApplies() {
		r.Unreached = r.Coverage.unreached()
	}
	v := SweepPassed
	for _, name := range runVerdicts {
		if r.Verdicts[name] > 0 {
			v = WorseSweep(v, name)
		}
		if r.StoreReplay != nil && r.StoreReplay.Verdicts[name] > 0 {
			v = WorseSweep(v, name)
		}
	}
	if r.Determinism.Diverged > 0 {
		v = WorseSweep(v, SweepNondeterministic)
	}
	if len(r.Unreached) > 0 {
		v = WorseSweep(v, SweepCoverageGap)
	}
	r.Verdict = v
}

// unreached names each fault site that never fired and each sometimes
// state never reached, sorted.
func (c *SweepCoverage) unreached() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.Sites)) {
		if c.Sites[name].Fired == 0 {
			out = append(out, "fault site "+name+" never fired")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Sometimes)) {
		if st := c.Sometimes[name]; st.Hits == 0 {
			out = append(out, fmt.Sprintf("sometimes state %s (%s) never reached: %s", name, st.Rule, st.Text))
		}
	}
	return out
}

// Validate checks r's internal consistency: the format and world, the
// shard and its block inside the range, the run count against the block
// and the verdict counts, failures of known verdicts inside the block in
// seed order, coverage present exactly for the handoff world, no negative
// count, and the verdict Finish computes. It cannot know which fault sites
// and sometimes states the coverage must name: MergeSweeps judges those
// against its CoverageTargets.
// Errors wrap ErrBadSweep.
func (r SweepResult) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadSweep, fmt.Sprintf(format, args...))
	}
	if r.Format != SweepFormat {
		return bad("format %q, want %q", r.Format, SweepFormat)
	}
	if r.World != SweepWorldHandoff && r.World != SweepWorldExecutor {
		return bad("world %q", r.World)
	}
	if r.Range.To < r.Range.From {
		return bad("range %s is empty", r.Range)
	}
	if r.Shard.Count < 1 || r.Shard.Index < 0 || r.Shard.Index >= r.Shard.Count {
		return bad("shard %s", r.Shard)
	}
	if r.MergedShards < 0 || r.MergedShards > 0 && r.Shard.Count != 1 {
		return bad("a merge of %d shards must be shard 0/1, not %s", r.MergedShards, r.Shard)
	}
	var n uint64
	if r.Seeds != nil {
		if r.Seeds.To < r.Seeds.From || r.Seeds.From < r.Range.From || r.Seeds.To > r.Range.To {
			return bad("seeds %s are not a block of range %s", r.Seeds, r.Range)
		}
		n = r.Seeds.Len()
	}
	if r.Shard.Count == 1 && (r.Seeds == nil || *r.Seeds != r.Range) {
		return bad("the only shard must hold the whole range %s", r.Range)
	}
	if r.Runs < 0 || uint64(r.Runs) != n {
		return bad("%d runs for %d seeds", r.Runs, n)
	}
	if err := checkVerdictCounts(r.Verdicts, r.Runs); err != nil {
		return bad("verdicts: %v", err)
	}
	if r.Events < 0 || r.Ticks < 0 || r.FailuresOmitted < 0 {
		return bad("negative events, ticks or omitted failures")
	}
	if err := checkFailures(r.Failures, r.Seeds); err != nil {
		return bad("failures: %v", err)
	}
	if failing := r.Runs - r.Verdicts[SweepPassed]; int64(len(r.Failures))+r.FailuresOmitted != failing {
		return bad("%d failures listed and %d omitted, but %d runs failed", len(r.Failures), r.FailuresOmitted, failing)
	}
	if sr := r.StoreReplay; sr != nil {
		if err := checkVerdictCounts(sr.Verdicts, sr.Runs); err != nil {
			return bad("store replay verdicts: %v", err)
		}
		if err := checkFailures(sr.Failures, nil); err != nil {
			return bad("store replay failures: %v", err)
		}
	}
	d := r.Determinism
	if d.OneIn < 0 || d.Sampled < 0 || d.Diverged < 0 || d.Diverged > d.Sampled || int64(len(d.Divergences)) > d.Diverged {
		return bad("determinism counts %d sampled, %d diverged, %d listed", d.Sampled, d.Diverged, len(d.Divergences))
	}
	if r.World == SweepWorldHandoff && r.Coverage == nil {
		return bad("a handoff result without coverage (the coverage gate could not judge its seeds)")
	}
	if r.World != SweepWorldHandoff && r.Coverage != nil {
		return bad("a %s result with coverage", r.World)
	}
	if c := r.Coverage; c != nil {
		if c.GateMinSeeds < 0 {
			return bad("negative gate_min_seeds")
		}
		for name, s := range c.Sites {
			var sum int64
			for _, n := range s.ByPoint {
				if n < 0 {
					return bad("site %s: negative count", name)
				}
				sum += n
			}
			if s.Fired < 0 || s.Seeds < 0 || s.Seeds > r.Runs || sum != s.Fired {
				return bad("site %s: fired %d, seeds %d, %d fires by point", name, s.Fired, s.Seeds, sum)
			}
		}
		for name, n := range c.Points {
			if n < 0 {
				return bad("point %s: negative steps", name)
			}
		}
		for name, s := range c.Sometimes {
			if s.Hits < 0 || s.Seeds < 0 || s.Seeds > s.Hits || s.Seeds > r.Runs {
				return bad("sometimes state %s: hits %d, seeds %d", name, s.Hits, s.Seeds)
			}
		}
	}
	again := r
	again.Finish()
	if again.Verdict != r.Verdict || strings.Join(again.Unreached, "\n") != strings.Join(r.Unreached, "\n") {
		return bad("verdict %q (unreached %d) but the counts give %q (unreached %d)", r.Verdict, len(r.Unreached), again.Verdict, len(again.Unreached))
	}
	return nil
}

func checkVerdictCounts(counts map[string]int64, runs int64) error {
	var sum int64
	for name, n := range counts {
		if _, ok := sweepRank[name]; !ok || name == SweepCoverageGap || name == SweepNondeterministic {
			return fmt.Errorf("unknown run verdict %q", name)
		}
		if n < 0 {
			return fmt.Errorf("%s: negative count", name)
		}
		sum += n
	}
	if sum != runs {
		return fmt.Errorf("counts add up to %d, not %d runs", sum, runs)
	}
	return nil
}

func checkFailures(fs []SweepFailure, block *SeedRange) error {
	for i, f := range fs {
		if f.Verdict == SweepPassed || !isRunVerdict(f.Verdict) {
			return fmt.Errorf("seed %d: verdict %q", f.Seed, f.Verdict)
		}
		if block != nil && (f.Seed < block.From || f.Seed > block.To) {
			return fmt.Errorf("seed %d outside %s", f.Seed, block)
		}
		if i > 0 && fs[i-1].Seed >= f.Seed {
			return fmt.Errorf("seed %d after %d: not in seed order", f.Seed, fs[i-1].Seed)
		}
		if f.Events < 0 {
			return fmt.Errorf("seed %d: negative events", f.Seed)
		}
	}
	return nil
}

func isRunVerdict(v string) bool {
	for _, name := range runVerdicts {
		if v == name {
			return true
		}
	}
	return false
}

// ParseSweep decodes a sweep result strictly (one JSON object, no unknown
// field, no trailing data) and validates it. Errors wrap ErrBadSweep.
func ParseSweep(raw []byte) (SweepResult, error) {
	var r SweepResult
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return SweepResult{}, fmt.Errorf("%w: %v", ErrBadSweep, err)
	}
	if dec.More() {
		return SweepResult{}, fmt.Errorf("%w: trailing data after the result", ErrBadSweep)
	}
	if err := r.Validate(); err != nil {
		return SweepResult{}, err
	}
	return r, nil
}

// ReadSweep reads the sweep result at path (ParseSweep).
func ReadSweep(path string) (SweepResult, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return SweepResult{}, fmt.Errorf("%w: %v", ErrBadSweep, err)
	}
	r, err := ParseSweep(raw)
	if err != nil {
		return SweepResult{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// WriteSweep writes r to path as indented JSON, atomically.
func WriteSweep(path string, r SweepResult) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("reports: encode %s: %w", path, err)
	}
	return writeFileAtomic(path, append(raw, '\n'))
}

// NamedSweep is a sweep result and where it came from (for messages).
type NamedSweep struct {
	Name   string      // where it came from: a file name
	Result SweepResult // the result read
}

// MergeError lists every reason shard results cannot be merged.
type MergeError struct{ Problems []string }

// Error lists the problems, one indented line each.
func (e *MergeError) Error() string {
	return "reports: cannot merge the sweep results:\n  " + strings.Join(e.Problems, "\n  ")
}

// Unwrap returns ErrBadSweep, so errors.Is(err, ErrBadSweep) holds.
func (e *MergeError) Unwrap() error { return ErrBadSweep }

// MergeOptions configures MergeSweeps.
type MergeOptions struct {
	// Keep is how many failing seeds the merge lists (the lowest); 0 lists
	// all.
	Keep int
	// Targets is what the coverage gate requires of a handoff sweep (the
	// simulator's sites, sometimes states and gate length); a merge of
	// handoff results without them is refused.
	Targets CoverageTargets
	// AllowUnstamped merges shards of an unstamped build (commit
	// UnstampedCommit), which could have come from two different builds.
	AllowUnstamped bool
}

// MergeSweeps adds the results of one sweep's shards up into one result
// (listing the opts.Keep lowest failing seeds) and finishes it: the
// coverage gate judges the merged counts of every target in opts.Targets
// (a site or state no shard names counts as 0) with the targets' gate
// length. Every shard 0..n-1 must be there exactly once, all of one world,
// commit, mutant, range and shard count, and their blocks must tile the
// range; every handoff shard must carry coverage of nothing but targets,
// and the commit must be stamped (unless opts.AllowUnstamped); otherwise a
// *MergeError (wrapping ErrBadSweep) names each missing or duplicate
// shard, each result on another commit or an unstamped build, each result
// without coverage or with coverage of something the targets lack, and
// each other mismatch.
func MergeSweeps(in []NamedSweep, opts MergeOptions) (SweepResult, error) {
	if len(in) == 0 {
		return SweepResult{}, &MergeError{[]string{"no sweep results given"}}
	}
	var problems []string
	ref := in[0].Result
	if ref.World == SweepWorldHandoff && opts.Targets.empty() {
		return SweepResult{}, &MergeError{[]string{"no coverage targets given: a handoff sweep's gate needs the simulator's fault sites and sometimes states"}}
	}
	commit := majorityCommit(in)
	byIndex := map[int]NamedSweep{}
	for _, s := range in {
		r := s.Result
		switch {
		case r.MergedShards > 0:
			problems = append(problems, fmt.Sprintf("%s is already a merge of %d shards", s.Name, r.MergedShards))
			continue
		case r.Commit != commit:
			problems = append(problems, fmt.Sprintf("%s (shard %s) ran on commit %s, the others on %s", s.Name, r.Shard, r.Commit, commit))
		case r.World != ref.World || r.Mutant != ref.Mutant || r.Range != ref.Range || r.Shard.Count != ref.Shard.Count:
			problems = append(problems, fmt.Sprintf("%s is shard %s of %s seeds %s mutant %q; %s is shard %s of %s seeds %s mutant %q",
				s.Name, r.Shard, r.World, r.Range, r.Mutant, in[0].Name, ref.Shard, ref.World, ref.Range, ref.Mutant))
			continue
		case r.Commit == UnstampedCommit && !opts.AllowUnstamped:
			problems = append(problems, fmt.Sprintf("%s (shard %s) ran on an unstamped build (commit %s): shards of two such builds cannot be told apart; stamp the build (make build, go build in a git checkout, the Dockerfile's COMMIT) or, if every shard ran one binary, pass --allow-unstamped", s.Name, r.Shard, UnstampedCommit))
		}
		problems = append(problems, opts.Targets.problems(s.Name, r)...)
		if old, dup := byIndex[r.Shard.Index]; dup {
			problems = append(problems, fmt.Sprintf("shard %s given twice: %s and %s", r.Shard, old.Name, s.Name))
			continue
		}
		byIndex[r.Shard.Index] = s
	}
	n := ref.Shard.Count
	next := ref.Range.From // the first seed no shard before covers
	var missing []string   // shards missing since the last one present
	// flush names the missing shards; gap says whether seeds next..end
	// are uncovered (missing shards of empty blocks leave none).
	flush := func(end uint64, gap bool) {
		if len(missing) == 0 {
			return
		}
		what := "shard " + missing[0] + " missing"
		if len(missing) > 1 {
			what = "shards " + strings.Join(missing, ", ") + " missing"
		}
		if gap {
			what += fmt.Sprintf(" (seeds %d..%d not covered)", next, end)
		}
		problems = append(problems, what)
		missing = nil
	}
	for i := 0; i < n; i++ {
		s, ok := byIndex[i]
		if !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", i, n))
			continue
		}
		b := s.Result.Seeds
		if b == nil {
			continue
		}
		if len(missing) > 0 {
			flush(b.From-1, b.From > next)
		} else if b.From != next {
			problems = append(problems, fmt.Sprintf("%s (shard %d/%d) starts at seed %d, but the shards before it end at %d", s.Name, i, n, b.From, next-1))
		}
		next = b.To + 1
	}
	flush(ref.Range.To, next <= ref.Range.To)
	if next != ref.Range.To+1 && len(problems) == 0 {
		problems = append(problems, fmt.Sprintf("the shards end at seed %d, the range at %d", next-1, ref.Range.To))
	}
	if len(problems) > 0 {
		return SweepResult{}, &MergeError{problems}
	}
	m := SweepResult{Format: SweepFormat, World: ref.World, Commit: commit, BatonVersion: ref.BatonVersion, Mutant: ref.Mutant,
		Range: ref.Range, Shard: ShardRef{0, 1}, Seeds: &SeedRange{ref.Range.From, ref.Range.To}, MergedShards: n,
		Verdicts: map[string]int64{}, Failures: []SweepFailure{}, Determinism: Determinism{OneIn: ref.Determinism.OneIn}}
	for i := 0; i < n; i++ {
		m.add(byIndex[i].Result)
	}
	if m.World == SweepWorldHandoff {
		opts.Targets.Complete(m.Coverage)
	}
	sort.Slice(m.Failures, func(i, j int) bool { return m.Failures[i].Seed < m.Failures[j].Seed })
	if keep := opts.Keep; keep > 0 && len(m.Failures) > keep {
		m.Failures = m.Failures[:keep]
	}
	m.FailuresOmitted = m.Runs - m.Verdicts[SweepPassed] - int64(len(m.Failures))
	if m.StoreReplay != nil {
		sort.Slice(m.StoreReplay.Failures, func(i, j int) bool { return m.StoreReplay.Failures[i].Seed < m.StoreReplay.Failures[j].Seed })
	}
	sort.Slice(m.Determinism.Divergences, func(i, j int) bool { return m.Determinism.Divergences[i].Seed < m.Determinism.Divergences[j].Seed })
	m.Finish()
	return m, nil
}

// majorityCommit is the commit most results ran on (the first's on a tie).
func majorityCommit(in []NamedSweep) string {
	count := map[string]int{}
	best := in[0].Result.Commit
	for _, s := range in {
		count[s.Result.Commit]++
		if count[s.Result.Commit] > count[best] {
			best = s.Result.Commit
		}
	}
	return best
}

// add adds shard result r into the merge m.
func (m *SweepResult) add(r SweepResult) {
	m.Runs += r.Runs
	for k, v := range r.Verdicts {
		m.Verdicts[k] += v
	}
	m.Events += r.Events
	m.Ticks += r.Ticks
	m.Failures = append(m.Failures, r.Failures...)
	if sr := r.StoreReplay; sr != nil {
		if m.StoreReplay == nil {
			m.StoreReplay = &StoreReplay{Verdicts: map[string]int64{}, Failures: []SweepFailure{}}
		}
		m.StoreReplay.Runs += sr.Runs
		for k, v := range sr.Verdicts {
			m.StoreReplay.Verdicts[k] += v
		}
		m.StoreReplay.Failures = append(m.StoreReplay.Failures, sr.Failures...)
	}
	m.Determinism.Sampled += r.Determinism.Sampled
	m.Determinism.Diverged += r.Determinism.Diverged
	m.Determinism.Divergences = append(m.Determinism.Divergences, r.Determinism.Divergences...)
	if c := r.Coverage; c != nil {
		if m.Coverage == nil {
			m.Coverage = &SweepCoverage{GateMinSeeds: c.GateMinSeeds, Sites: map[string]SiteCount{}, Points: map[string]int64{}, Sometimes: map[string]SometimesCount{}}
		}
		mc := m.Coverage
		mc.GateMinSeeds = max(mc.GateMinSeeds, c.GateMinSeeds)
		for name, s := range c.Sites {
			t := mc.Sites[name]
			t.Fired += s.Fired
			t.Seeds += s.Seeds
			for p, n := range s.ByPoint {
				if t.ByPoint == nil {
					t.ByPoint = map[string]int64{}
				}
				t.ByPoint[p] += n
			}
			mc.Sites[name] = t
		}
		for p, n := range c.Points {
			mc.Points[p] += n
		}
		for name, s := range c.Sometimes {
			t := mc.Sometimes[name]
			t.Rule, t.Text = s.Rule, s.Text
			t.Hits += s.Hits
			t.Seeds += s.Seeds
			mc.Sometimes[name] = t
		}
	}
}

// Lines renders r for a terminal: the counts, the store replay, the
// determinism sample, each failure with its replay command, the coverage
// table (CoverageLines) and the verdict with what the gate missed.
func (r SweepResult) Lines() []string {
	var out []string
	what := "seeds " + r.Range.String()
	if r.World == SweepWorldExecutor {
		what = "executor " + what
	}
	switch {
	case r.MergedShards > 0:
		what += fmt.Sprintf(" (%d shards merged)", r.MergedShards)
	case r.Shard.Count > 1 && r.Seeds != nil:
		what += fmt.Sprintf(" shard %s (seeds %s)", r.Shard, r.Seeds)
	case r.Shard.Count > 1:
		what += fmt.Sprintf(" shard %s (no seeds: more shards than seeds)", r.Shard)
	}
	tail := "commit " + r.Commit
	if r.Mutant != "" {
		tail += ", mutant " + r.Mutant
	}
	if r.World == SweepWorldExecutor {
		out = append(out, fmt.Sprintf("%s: %d runs, %d passed, %d failed; %d scheduler steps (%s)",
			what, r.Runs, r.Verdicts[SweepPassed], r.Runs-r.Verdicts[SweepPassed], r.Events, tail))
	} else {
		out = append(out, fmt.Sprintf("%s: %d runs, %d passed, %d correctness, %d liveness, %d crash; %d events, %d simulated ticks (%s)",
			what, r.Runs, r.Verdicts[SweepPassed], r.Verdicts[SweepCorrectness], r.Verdicts[SweepLiveness], r.Verdicts[SweepCrash], r.Events, r.Ticks, tail))
	}
	if sr := r.StoreReplay; sr != nil {
		out = append(out, fmt.Sprintf("store replay: %d stored seeds re-run first, %d passed, %d failed", sr.Runs, sr.Verdicts[SweepPassed], sr.Runs-sr.Verdicts[SweepPassed]))
		for _, f := range sr.Failures {
			out = append(out, failureLines("FAIL (stored) ", f)...)
		}
	}
	d := r.Determinism
	out = append(out, fmt.Sprintf("determinism: %d sampled passing seeds (1 in %d) run twice, %d diverged", d.Sampled, d.OneIn, d.Diverged))
	for _, dv := range d.Divergences {
		out = append(out, fmt.Sprintf("NONDETERMINISTIC seed=%d: two runs wrote different traces %s", dv.Seed, strings.Join(dv.Traces, " ")))
	}
	for _, f := range r.Failures {
		out = append(out, failureLines("FAIL ", f)...)
	}
	if r.FailuresOmitted > 0 {
		out = append(out, fmt.Sprintf("... and %d more failing seeds (the lowest %d are listed)", r.FailuresOmitted, len(r.Failures)))
	}
	out = append(out, r.CoverageLines()...)
	for _, u := range r.Unreached {
		out = append(out, "UNREACHED "+u)
	}
	out = append(out, "verdict: "+r.Verdict)
	return out
}

func failureLines(prefix string, f SweepFailure) []string {
	out := []string{fmt.Sprintf("%sseed=%d %s %s", prefix, f.Seed, f.Verdict, f.Failure), "  replay: " + f.Replay}
	if f.Trace != "" {
		out = append(out, "  trace: "+f.Trace)
	}
	return out
}

// CoverageLines renders the coverage table: every fault site with its
// fires, seeds and fires per lifecycle point (most first), every sometimes
// state with its rule, hits and seeds, and the steps per lifecycle point.
func (r SweepResult) CoverageLines() []string {
	c := r.Coverage
	if c == nil {
		return nil
	}
	gate := "applied"
	if !r.GateApplies() {
		gate = fmt.Sprintf("not applied: %d seeds, it needs %d", r.Runs, c.GateMinSeeds)
	}
	out := []string{fmt.Sprintf("coverage over %d seeds (gate: every fault site fires and every sometimes state is reached in a sweep of at least %d seeds; %s)", r.Runs, c.GateMinSeeds, gate),
		fmt.Sprintf("  %-38s %10s %8s  %s", "fault site", "fired", "seeds", "fires per lifecycle point")}
	for _, name := range slices.Sorted(maps.Keys(c.Sites)) {
		s := c.Sites[name]
		out = append(out, fmt.Sprintf("  %-38s %10d %8d  %s", name, s.Fired, s.Seeds, byCount(s.ByPoint)))
	}
	out = append(out, fmt.Sprintf("  %-44s %-5s %10s %8s", "sometimes state", "rule", "hits", "seeds"))
	for _, name := range slices.Sorted(maps.Keys(c.Sometimes)) {
		s := c.Sometimes[name]
		out = append(out, fmt.Sprintf("  %-44s %-5s %10d %8d", name, s.Rule, s.Hits, s.Seeds))
	}
	out = append(out, "  steps per lifecycle point: "+byCount(c.Points))
	return out
}

// byCount renders counts as "name count" pairs, most first.
func byCount(m map[string]int64) string {
	keys := slices.Sorted(maps.Keys(m))
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
