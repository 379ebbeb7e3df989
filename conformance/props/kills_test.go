package props_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/baton-dev/baton/conformance/mutants"
	"github.com/baton-dev/baton/conformance/props"
	"github.com/baton-dev/baton/conformance/target/inprocess"
	"github.com/baton-dev/baton/engine/server"
)

// killedBy runs the handoff property against the in-process engines with
// mutant name applied, from the mutant's fixed kill-table seed
// (Mutant.Seed, printed) and without shrinking, so the verdict is the same
// on every run; it fails the test unless the property failed naming rule
// (or one of its |-separated alternatives). The kill table
// (conformance/e2e, make mutants) judges the counterexample's length;
// make mutants-explore draws fresh seeds.
func killedBy(t *testing.T, name, rule string, testHooks bool) props.Report {
	t.Helper()
	if raceEnabled || testing.Short() {
		t.Skip("the kill table (conformance/e2e, make mutants) runs the same kills; under the race detector the encoder is too slow for 100 checks")
	}
	m, err := mutants.ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	var hooks server.Hooks
	m.Apply(&hooks)
	tg, stop, err := inprocess.StartEPD(inprocess.Options{Preset: "tiny", CacheDir: t.TempDir(), Hooks: hooks, TestHooks: testHooks})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	rep := props.Run(props.Handoff(props.Shared(tg), props.Config{}), props.RunOptions{
		Name: t.Name(), Seed: m.Seed(), Checks: 100, Steps: 15, NoShrink: true, NoFailFile: true,
	})
	switch {
	case rep.Passed:
		t.Fatalf("mutant %s (%s) survived 100 checks (seed %d)", name, rule, rep.Seed)
	case !slices.ContainsFunc(strings.Split(rule, "|"), func(r string) bool { return strings.Contains(rep.Output, r) }):
		t.Errorf("mutant %s killed, but the failure does not name %s:\n%s", name, rule, lastLines(rep.Output, 20))
	}
	found := ""
	if i := strings.Index(rep.Output, "[rapid] failed after "); i >= 0 {
		found = strings.SplitN(rep.Output[i:], ":", 2)[0]
	}
	t.Logf("%s killed in %.1fs (%s), %d actions (seed %d):\n%s", name, rep.Elapsed.Seconds(), found, rep.Actions, rep.Seed, lastLines(rep.Output, 12))
	return rep
}

// TestBadInputKillsMutants: the badInput action kills the engines that
// skip L-1, L-3, L-4 or N-1.
func TestBadInputKillsMutants(t *testing.T) {
	for _, tc := range []struct{ mutant, rule string }{
		{"l1-no-reference-limit", "L-1"},
		{"l3-video-as-image", "L-3"},
		{"l4-role-unchecked", "L-4"},
		{"n1-any-backend", "N-1"},
	} {
		t.Run(tc.mutant, func(t *testing.T) { killedBy(t, tc.mutant, tc.rule, false) })
	}
}

// TestMediaKillsMutants: the media action kills the engines that key the
// prefix cache by text (B-2), take a MediaItem.uuid for the image (H-5),
// hash premultiplied pixels (H-1) or the wire bytes (H-4); the hash rules
// are Lifecycle's, so those run against engines with test hooks (the
// profile then claims that level).
func TestMediaKillsMutants(t *testing.T) {
	for _, tc := range []struct {
		mutant, rule string
		lifecycle    bool
	}{
		{"b2-text-keyed-cache", "B-2", false},
		{"h5-uuid-identity", "H-5", false},
		{"h1-premultiplied-hash", "H-1", true},
		{"h4-wire-bytes-hash", "H-4|H-1", true}, // a hash of the wire bytes breaks H-1 too
	} {
		t.Run(tc.mutant, func(t *testing.T) { killedBy(t, tc.mutant, tc.rule, tc.lifecycle) })
	}
}
