package world

import (
	"slices"
	"strconv"
	"testing"
)

// TestMutantsKilled: each mutant (a broken decision injected through the
// driver's hook) is found within 2,000 seeds by the checker of the rule it
// breaks, with a replay command that reproduces it, also from its trace.
func TestMutantsKilled(t *testing.T) {
	for m, rule := range Mutants {
		t.Run(string(m), func(t *testing.T) {
			var found *Result
			for seed := uint64(1); seed <= 2000 && found == nil; seed++ {
				if r := RunSeed(seed, Options{Mutant: m}); r.Verdict != Passed {
					found = &r
				}
			}
			if found == nil {
				t.Fatalf("mutant %s (%s) survived seeds 1..2000", m, rule)
			}
			r := *found
			t.Logf("killed at seed %d: %s\n  replay: %s", r.Seed, r.Failure, r.ReplayCommand())
			if r.Verdict != Correctness || r.Rule != rule {
				t.Errorf("seed %d: verdict %v rule %q, want CORRECTNESS FAILURE of %s", r.Seed, r.Verdict, r.Rule, rule)
			}
			want := "baton sim --seed " + strconv.FormatUint(r.Seed, 10) + " --mutant " + string(m)
			if r.ReplayCommand() != want {
				t.Errorf("replay command %q, want %q", r.ReplayCommand(), want)
			}
			again := RunSeed(r.Seed, Options{Mutant: m})
			if again.Failure != r.Failure {
				t.Errorf("re-run of seed %d: %q, want %q", r.Seed, again.Failure, r.Failure)
			}
			path, err := WriteTrace(t.TempDir(), r)
			if err != nil {
				t.Fatal(err)
			}
			replayed, err := Replay(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if replayed.Failure != r.Failure || replayed.Mutant != m {
				t.Errorf("replay of %s: %q (mutant %q), want %q", path, replayed.Failure, replayed.Mutant, r.Failure)
			}
		})
	}
}

// alsoBreaks lists the rules a mutant breaks besides its own, where one
// observation is both: a prefix cache keyed by token ids alone (B-2) also
// drops the fresh identity of an item without hash (H-2) and the identity
// of images sent under one uuid (H-5), so a run whose only collisions are
// of that kind is rightly diagnosed as those.
var alsoBreaks = map[Mutant][]string{MutantTextKeyedCache: {"H-2", "H-5"}}

// TestMutantsFailOnlyTheirRule: every seed a mutant fails (of the first
// 300) fails with a correctness verdict of the rule the mutant breaks (or
// one of alsoBreaks), so that the seed that finds it names a rule it breaks.
func TestMutantsFailOnlyTheirRule(t *testing.T) {
	for m, rule := range Mutants {
		t.Run(string(m), func(t *testing.T) {
			failed := 0
			for seed := uint64(1); seed <= 300; seed++ {
				r := RunSeed(seed, Options{Mutant: m})
				if r.Verdict == Passed {
					continue
				}
				failed++
				if r.Verdict != Correctness || (r.Rule != rule && !slices.Contains(alsoBreaks[m], r.Rule)) {
					t.Errorf("seed %d: %v %q, want a CORRECTNESS FAILURE of %s: %s", seed, r.Verdict, r.Rule, rule, r.Failure)
				}
			}
			t.Logf("%d of 300 seeds failed %s", failed, rule)
		})
	}
}

// mutantSeeds are seeds on which a mutant's broken path once crashed the
// world instead of being judged: each must end Passed or with a
// correctness failure of the mutant's rule, never Crash.
var mutantSeeds = map[Mutant][]uint64{
	// A wrong-role probe arrived while E was down after a crash: the
	// mutant served it with the dead process's shared-directory handle
	// ("file already closed"); a down E now refuses the connection, as it
	// does every other request.
	MutantRoleUnchecked: {831, 1987},
}

// TestMutantSeedsDoNotCrash: the seeds of mutantSeeds are judged, not
// crashed.
func TestMutantSeedsDoNotCrash(t *testing.T) {
	for m, seeds := range mutantSeeds {
		for _, seed := range seeds {
			r := RunSeed(seed, Options{Mutant: m})
			if r.Verdict == Passed {
				continue
			}
			if r.Verdict != Correctness || r.Rule != Mutants[m] {
				t.Errorf("mutant %s seed %d: %v %q, want PASSED or a CORRECTNESS FAILURE of %s: %s\n  replay: %s", m, seed, r.Verdict, r.Rule, Mutants[m], r.Failure, r.ReplayCommand())
			}
		}
	}
}
