package world

import (
	"testing"

	"github.com/baton-dev/baton/engine/cache/shareddir"
)

// plantedBugSeeds bounds the seeds TestSimFindsPlantedClaimBug may need.
const plantedBugSeeds = 300

// TestSimFindsPlantedClaimBug: the simulator runs the real shareddir.Claim
// (shared_disk.go), so a bug planted in Claim ITSELF, not in a model of it,
// is found: with each planted bug a shared-directory seed among the first
// plantedBugSeeds fails CORRECTNESS naming SU-1, and with the bug removed
// the same seeds pass. ClaimBugCopy (read, no rename) is found by any
// replayed reference; ClaimBugUncheckedDelete (delete instead of rename,
// "not found" ignored) only when another process takes the entry between
// the Claim's open and its delete: another consumer's Claim
// (shared_disk.go claimInsideClaim) or the producer's Remove of a released
// or expired entry (seed 3 finds it so). The seeds used are logged (go
// test -v).
func TestSimFindsPlantedClaimBug(t *testing.T) {
	var seeds []uint64
	for seed := uint64(1); seed <= plantedBugSeeds; seed++ {
		if DrawSettings(seed).Backend == BackendSharedDir {
			seeds = append(seeds, seed)
		}
	}
	for _, bug := range []struct {
		name string
		bug  shareddir.ClaimBug
	}{{"copy", shareddir.ClaimBugCopy}, {"unchecked-delete", shareddir.ClaimBugUncheckedDelete}} {
		t.Run(bug.name, func(t *testing.T) {
			restore := shareddir.PlantClaimBugForTest(bug.bug)
			var found *Result
			var ran []uint64
			for _, seed := range seeds {
				r := RunSeed(seed, Options{})
				ran = append(ran, seed)
				if r.Verdict != Passed {
					t.Logf("bug on, seed %d: %v %s: %s", seed, r.Verdict, r.Rule, r.Failure)
				}
				if r.Verdict == Correctness && r.Rule == "SU-1" {
					found = &r
					break
				}
			}
			restore()
			t.Logf("bug %s on: shared-directory seeds run %v", bug.name, ran)
			if found == nil {
				t.Fatalf("%s planted in shareddir.Claim: no SU-1 CORRECTNESS FAILURE in %d shared-directory seeds", bug.name, len(ran))
			}
			t.Logf("found by seed %d (%s): %s", found.Seed, found.ReplayCommand(), found.Failure)
			for _, seed := range ran {
				if r := RunSeed(seed, Options{}); r.Verdict != Passed {
					t.Errorf("bug off, seed %d: %v %s", seed, r.Verdict, r.Failure)
				}
			}
			t.Logf("bug off: the %d seeds passed", len(ran))
		})
	}
}
