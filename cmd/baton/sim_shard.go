package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/baton-dev/baton/conformance/check"
	"github.com/baton-dev/baton/reports"
	"github.com/baton-dev/baton/sim"
	"github.com/spf13/cobra"
)

// Exit codes of a sweep beyond the run verdicts' (0 passed, 1 correctness,
// 2 liveness, ExitSimCrash): a sampled seed whose two runs differed, and a
// sweep of at least sim.GateMinSeeds seeds that missed a fault site or a
// sometimes state.
const (
	ExitSimNondeterministic = 6
	ExitSimCoverage         = 7
)

// sweepExit maps a sweep verdict (reports.Sweep*) to the exit code.
func sweepExit(verdict string) int {
	switch verdict {
	case reports.SweepPassed:
		return ExitPassed
	case reports.SweepCorrectness:
		return int(sim.Correctness)
	case reports.SweepLiveness:
		return int(sim.Liveness)
	case reports.SweepCrash:
		return ExitSimCrash
	case reports.SweepNondeterministic:
		return ExitSimNondeterministic
	case reports.SweepCoverageGap:
		return ExitSimCoverage
	}
	return ExitUsage
}

// sweepExitHelp documents the exit codes of a range (sim and report merge).
const sweepExitHelp = `For a range, the worst of: 5 crash, 1 correctness, 6 nondeterministic (a
sampled passing seed's two runs wrote different traces; both are kept), 2
liveness, 7 coverage (a sweep of at least 10,000 seeds in which a fault
site never fired or a sometimes state was never reached; the failure names
each), 0 passed.`

// sweepFlags are the flags a sweep shares: its shard, its result file and
// (baton sim only) the seed store.
type sweepFlags struct {
	shard       string
	shards      int
	results     string
	store       string
	storeKeep   int
	replayStore string
}

// shardFlagHelp is --shard's help text.
const shardFlagHelp = "run shard i of n (0-based) of the range: contiguous blocks, seeds A+floor(i*N/n) .. A+floor((i+1)*N/n)-1 of the N seeds A..B; without it, " +
	sim.EnvJobCompletionIndex + " (a Kubernetes Indexed Job) gives the index and --shards or " + sim.EnvShards + " the count"

func addSweepFlags(cmd *cobra.Command, f *sweepFlags, store bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.shard, "shard", "", shardFlagHelp)
	fl.IntVar(&f.shards, "shards", 0, "the shard count when the index comes from "+sim.EnvJobCompletionIndex+" (default: "+sim.EnvShards+")")
	fl.StringVar(&f.results, "results", "", "write the sweep's JSON result to this file (range, shard, commit, verdict counts, failing seeds with replay commands, coverage), or, for a directory (or a name ending in /), to DIR/<world>-shard-<i>-of-<n>.json; 'baton report merge' adds shards' results up")
	if store {
		fl.StringVar(&f.store, "store", "", "record every failing seed (commit, mutant, settings, trace) in this seed store directory")
		fl.IntVar(&f.storeKeep, "store-keep", sim.DefaultStoreKeep, "records the store keeps per commit (failing before passing, faster-failing before slower)")
		fl.StringVar(&f.replayStore, "replay-store", "", "re-run every seed stored in this seed store before the range (a regression gate; shards split the stored seeds)")
	}
}

// resolveShard is the sweep's shard from --shard, --shards and the environment.
func (f sweepFlags) resolveShard() (sim.Shard, error) {
	sh, err := sim.ShardFrom(f.shard, f.shards, os.LookupEnv)
	if err != nil {
		return sim.Shard{}, exitError{ExitUsage, err.Error()}
	}
	return sh, nil
}

// newSweepResult is the result skeleton of shard sh of from..to.
func newSweepResult(world string, from, to uint64, sh sim.Shard, mutant string) (reports.SweepResult, uint64, uint64, bool) {
	count := max(sh.Count, 1)
	res := reports.SweepResult{Format: reports.SweepFormat, World: world, Commit: check.BatonCommit(), BatonVersion: check.BatonVersion(),
		Mutant: mutant, Range: reports.SeedRange{From: from, To: to}, Shard: reports.ShardRef{Index: sh.Index, Count: count},
		Verdicts: map[string]int64{}, Failures: []reports.SweepFailure{}, Determinism: reports.Determinism{OneIn: sim.DeterminismOneIn}}
	a, b, ok := sh.Part(from, to)
	if ok {
		res.Seeds = &reports.SeedRange{From: a, To: b}
	}
	return res, a, b, ok
}

// sweepFailure is a failing run's line in a result.
func sweepFailure(r sim.Result) reports.SweepFailure {
	return reports.SweepFailure{Seed: r.Seed, Verdict: sim.VerdictName(r.Verdict), Rule: r.Rule, Failure: firstLine(r.Failure), Events: r.Events, Replay: r.ReplayCommand()}
}

// coverageResult converts the simulator's coverage counts.
func coverageResult(c *sim.Coverage) *reports.SweepCoverage {
	out := &reports.SweepCoverage{GateMinSeeds: sim.GateMinSeeds, Sites: map[string]reports.SiteCount{}, Points: c.Points(), Sometimes: map[string]reports.SometimesCount{}}
	for _, s := range c.Sites() {
		out.Sites[string(s.Site)] = reports.SiteCount{Fired: s.Fired, Seeds: s.Seeds, ByPoint: s.ByPoint}
	}
	for _, s := range c.Sometimes() {
		out.Sometimes[s.State.Name] = reports.SometimesCount{Rule: s.State.Rule, Text: s.State.Text, Hits: s.Hits, Seeds: s.Seeds}
	}
	return out
}

// coverageTargets is what the coverage gate requires of a handoff sweep:
// every fault site (sim.AllSites) and sometimes state
// (sim.SometimesStates), from sim.GateMinSeeds seeds on.
func coverageTargets() reports.CoverageTargets {
	t := reports.CoverageTargets{GateMinSeeds: sim.GateMinSeeds}
	for _, s := range sim.AllSites {
		t.Sites = append(t.Sites, string(s))
	}
	for _, s := range sim.SometimesStates {
		t.Sometimes = append(t.Sometimes, reports.SometimesTarget{Name: s.Name, Rule: s.Rule, Text: s.Text})
	}
	return t
}

// finishSweep finishes res (a handoff result's gate judging every
// coverage target), prints it, writes --results and returns the exit.
func finishSweep(out io.Writer, res reports.SweepResult, f sweepFlags) error {
	if res.Coverage != nil {
		coverageTargets().Complete(res.Coverage)
	}
	res.Finish()
	for _, l := range res.Lines() {
		fmt.Fprintln(out, l)
	}
	if f.results != "" {
		path := resultsPath(f.results, res)
		if err := reports.WriteSweep(path, res); err != nil {
			return exitError{ExitUsage, err.Error()}
		}
		fmt.Fprintf(out, "results: %s\n", path)
	}
	if code := sweepExit(res.Verdict); code != ExitPassed {
		return exitError{code, ""}
	}
	return nil
}

// resultsPath is where --results writes: the file named, or, for a
// directory (an existing one, or a name ending in /), a file in it named
// by the world and the shard, so shards sharing a volume never collide:
// DIR/<world>-shard-<i>-of-<n>.json.
func resultsPath(results string, res reports.SweepResult) string {
	if st, err := os.Stat(results); err == nil && st.IsDir() || strings.HasSuffix(results, "/") {
		return filepath.Join(results, fmt.Sprintf("%s-shard-%d-of-%d.json", res.World, res.Shard.Index, res.Shard.Count))
	}
	return results
}

// seedStore is the sweep's --store, recording from the workers; the first
// error is kept for the end.
type seedStore struct {
	st    *sim.Store
	mu    sync.Mutex
	err   error
	paths map[uint64]string // seed -> trace path of a kept failing record
}

func openSeedStore(f sweepFlags) (*seedStore, error) {
	if f.store == "" {
		return nil, nil
	}
	st, err := sim.OpenStore(f.store, check.BatonCommit(), f.storeKeep)
	if err != nil {
		return nil, exitError{ExitUsage, err.Error()}
	}
	return &seedStore{st: st, paths: map[uint64]string{}}, nil
}

// record stores r (safe for concurrent use; s may be nil).
func (s *seedStore) record(r sim.Result) {
	if s == nil {
		return
	}
	rec, kept, err := s.st.Record(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && s.err == nil {
		s.err = err
	}
	if kept && rec.Trace != "" {
		s.paths[r.Seed] = filepath.Join(s.st.CommitDir(), rec.Trace)
	}
}

// tracePath is the store's trace of a failing seed ("" when not kept).
func (s *seedStore) tracePath(seed uint64) string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paths[seed]
}

// replayStore re-runs the seeds of the store at dir that shard sh owns
// (the regression gate), recording each into store when given.
func replayStore(out io.Writer, dir string, sh sim.Shard, m sim.Mutant, store *seedStore, traceDir string) (*reports.StoreReplay, error) {
	recs, err := sim.ReadStore(dir)
	if err != nil {
		return nil, exitError{ExitUsage, err.Error()}
	}
	sr := &reports.StoreReplay{Verdicts: map[string]int64{}, Failures: []reports.SweepFailure{}}
	for _, rec := range sim.ReplaySet(recs, m) {
		if sim.StoreOwner(rec.Seed, max(sh.Count, 1)) != sh.Index {
			continue
		}
		r := sim.Run(rec.Seed, rec.Settings, sim.Options{Mutant: m})
		sr.Runs++
		sr.Verdicts[sim.VerdictName(r.Verdict)]++
		store.record(r)
		if r.Verdict == sim.Passed {
			continue
		}
		// The stored settings are not necessarily what the seed draws at
		// this commit: replay through a trace, whose header holds them.
		fail := sweepFailure(r)
		trace := store.tracePath(r.Seed)
		if trace == "" && traceDir != "" {
			trace, _ = sim.WriteTrace(traceDir, r)
		}
		if trace == "" && rec.Trace != "" {
			trace = filepath.Join(dir, sim.CommitDirName(rec.Commit), rec.Trace)
		}
		if trace != "" {
			fail.Replay, fail.Trace = "baton sim replay "+trace, trace
		}
		sr.Failures = append(sr.Failures, fail)
	}
	if !sh.Whole() {
		fmt.Fprintf(out, "store replay: %d of the %d stored runs belong to shard %s\n", sr.Runs, len(recs), sh)
	}
	return sr, nil
}
