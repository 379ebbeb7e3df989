package world

import (
	"testing"
)

// seedsToExplore is the number of seeds TestSeedsPass runs (about 1 s on
// 2 cores, about 6 s under the race detector).
const seedsToExplore = 2000

// TestSeedsPass: the correct driver passes every seed (safety and liveness)
// on the reference core. Each failure prints its replay command.
func TestSeedsPass(t *testing.T) {
	n := uint64(seedsToExplore)
	sum := Explore(1, n, 2, MutantNone, nil)
	for _, r := range sum.Failures {
		t.Errorf("seed %d: %v %s\n  replay: %s", r.Seed, r.Verdict, r.Failure, r.ReplayCommand())
	}
	if sum.Runs != int(n) || sum.ByVerdict[Passed] != int(n) {
		t.Errorf("runs %d, passed %d, want %d", sum.Runs, sum.ByVerdict[Passed], n)
	}
	t.Logf("seeds 1..%d: %d events, %d simulated ticks", n, sum.Events, sum.Ticks)
}

// TestSeedsCoverBothBackendsAndEveryFault: the seeds the suite runs draw both
// backends and make every fault site fire somewhere (else a site is dead code).
func TestSeedsCoverBothBackendsAndEveryFault(t *testing.T) {
	backends := map[string]int{}
	fired := map[Site]int{}
	for seed := uint64(1); seed <= 300; seed++ {
		r := RunSeed(seed, Options{})
		backends[r.Settings.Backend]++
		for s, n := range r.Fired {
			fired[s] += n
		}
	}
	if backends[BackendSharedDir] == 0 || backends[BackendTransfer] == 0 {
		t.Errorf("backends drawn %v, want both", backends)
	}
	for _, s := range AllSites {
		if fired[s] == 0 {
			t.Errorf("fault site %s never fired in seeds 1..300", s)
		}
	}
}

// foundSeeds are seeds that once failed, with what they found; each must
// pass now. (A seed's meaning moves when the draws change, so each finding
// also has a test of its own in the package it was fixed in.)
var foundSeeds = map[uint64]string{
	192999: "X-1: a release after a failed removal answered ALREADY_FINISHED while the entry's file stayed claimable, so a later consume succeeded on a spent reference (SU-2, SU-3); handoff.ReleaseCleanupFailed",
	576264: "SU-3: a release arriving while an earlier release's removal was in flight answered ALREADY_FINISHED at once, then a consumer's claim won the rename and its consume answered OK (SU-2, history not linearizable); handoff.ReleaseWait, testdata/scenarios/release_during_removal.txt",
	954255: "SU-3, X-1: the same, with the removal in flight failing (X-1) and leaving the entry claimable; handoff.ReleaseWait",
	285515: "S-2, S-4: a consume in flight on P when its drain began ended OK later; the KV session of its PrefillReady was never released (the simulator's P released its sessions only when the drain began); World.consumerDrained, testdata/scenarios/eppd_prefill_during_drain.txt (its draws changed with the ReleaseWait fix; 572691 found it again)",
	572691: "S-2, S-4: the leaked KV session of 285515, found again after the ReleaseWait fix; World.consumerDrained",
	920554: "liveness: E crashed while draining after a Shutdown and was down when the run's end shut every node down; the end asked the dead instance's Health, so the restarted instance was never shut down (a simulator driver bug); World.endCheck, testdata/scenarios/producer_restart_during_drain.txt (its draws changed with the ReleaseWait fix)",
}

// TestFoundSeedsPass runs the seeds that once failed.
func TestFoundSeedsPass(t *testing.T) {
	for seed, found := range foundSeeds {
		if r := RunSeed(seed, Options{}); r.Verdict != Passed {
			t.Errorf("seed %d (found: %s): %v %s\n  replay: %s", seed, found, r.Verdict, r.Failure, r.ReplayCommand())
		}
	}
}
