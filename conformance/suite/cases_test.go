package suite

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
)

// recorder is what a case reported (Record), in the fields the tests read.
type recorder struct {
	failed, skipped bool
	msgs            []string
}

func (r *recorder) outcome() Outcome { return OutcomeOf(r.failed, r.skipped, r.msgs...) }

func (r *recorder) String() string {
	return fmt.Sprintf("%s: %s", r.outcome(), strings.Join(r.msgs, "\n\t"))
}

// runCase runs c against tg (Record, bounded by 30 s) and returns what it reported.
func runCase(t *testing.T, c Case, tg target.Target) *recorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := Record(ctx, c, tg)
	return &recorder{failed: rec.Failed, skipped: rec.Skipped, msgs: rec.Messages}
}

// fullProfile declares everything the cases can use; the quota holds 10
// entries, and the fake decodes every format.
func fullProfile() target.Profile {
	return target.Profile{
		Name: "fake", Topologies: []string{"E+PD"}, Backends: []string{fakeBackend},
		Observables: true, Destructive: true, ProducerQuotaBytes: 10 * fakeEntryBytes,
		ReferenceFormat: FormatBatonJSONv1, CaseTimeout: 30 * time.Second,
		MediaFormats: []string{target.MediaPNG, target.MediaJPEG, target.MediaGIF, target.MediaWebP},
	}
}

// bareProfile declares only the topology: no observables, format, quota,
// optional media format or permission to shut down.
func bareProfile() target.Profile {
	return target.Profile{Name: "fake-bare", Topologies: []string{"E+PD"}, CaseTimeout: 30 * time.Second}
}

// wantOnFake is the outcome a case must have against the conforming fake
// tg: what Decide says before the case runs (topology, declared needs: the
// fake implements no test hook and no restart or fault injection, so those
// cases are not verifiable or not applicable by their Needs), and for the
// cases that run, passed, except R-1, which discovers that the fake has no
// executor.* counters (Needs.Discovers) and ends not verifiable.
func wantOnFake(c Case, tg target.Target) Outcome {
	if o, _ := c.Decide(EnvOf(tg)); o != "" {
		return o
	}
	if c.Rule == "R-1" {
		return OutcomeNotVerifiable
	}
	return OutcomePassed
}

// runAllOnFake runs every case, in registry order, against one fake world
// built by mk (destructive ones against a fresh one), and reports each
// whose outcome is not wantOnFake's.
func runAllOnFake(t *testing.T, mk func() target.Target) {
	t.Helper()
	shared := mk()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			tg := shared
			if c.Destructive {
				tg = mk()
			}
			r := runCase(t, c, tg)
			if got, want := r.outcome(), wantOnFake(c, tg); got != want {
				t.Errorf("%s = %s; want %s", c.Name, r, want)
			}
		})
	}
}

// TestCasesPassOnConformingFake runs every case against a conforming fake
// declaring every optional format: each passes, except those Decide ends
// before running (E+P+D, test hooks, fault proxy, restarts, volume).
func TestCasesPassOnConformingFake(t *testing.T) {
	t.Parallel() // the fake tests mostly wait (TTLs, settle timeouts): they overlap
	runAllOnFake(t, func() target.Target {
		return newFakeWorld(fakeMutant{}, fullProfile().ProducerQuotaBytes).target(fullProfile())
	})
}

// TestCasesWithBareProfile runs every case against a fake whose profile
// declares nothing optional: the cases needing the format, the quota,
// observables or destruction end not verifiable (or, for the format-aware
// checks on top of format-agnostic ones, not applicable) by their Needs;
// the rest pass on the wire alone.
func TestCasesWithBareProfile(t *testing.T) {
	t.Parallel()
	runAllOnFake(t, func() target.Target { return newFakeWorld(fakeMutant{}, 0).target(bareProfile()) })
}

// TestCasesOnARequiredFormatsOnlyFake: an engine that decodes PNG and JPEG
// only (GIF and WebP answered "unknown image format"), with a profile that
// declares no optional format, passes every case it passes with all
// formats: no case depends on an optional format it does not declare.
func TestCasesOnARequiredFormatsOnlyFake(t *testing.T) {
	t.Parallel()
	p := fullProfile()
	p.MediaFormats = nil
	runAllOnFake(t, func() target.Target {
		w := newFakeWorld(fakeMutant{}, p.ProducerQuotaBytes)
		w.requiredFormatsOnly = true
		return w.target(p)
	})
}

// TestNoTopology: a target that does not serve E+PD gets `not applicable`
// for every E+PD case.
func TestNoTopology(t *testing.T) {
	p := fullProfile()
	p.Topologies = nil // nothing declared: the engines present decide
	w := newFakeWorld(fakeMutant{}, p.ProducerQuotaBytes)
	tg := target.NewStatic(p, map[target.Role]target.Engine{target.RoleBaseline: &fakeEngine{w, target.RoleBaseline}})
	for _, c := range Cases() {
		if c.Rule == "S-1" || !slices.ContainsFunc(c.Labels, func(l string) bool { return strings.HasPrefix(l, "topology:") }) {
			continue // S-1 visits whatever engines exist; cases with no topology label need only the baseline
		}
		r := runCase(t, c, tg)
		if got := r.outcome(); got != OutcomeNotApplicable {
			t.Errorf("%s on a target without E+PD = %s; want %s", c.Name, r, OutcomeNotApplicable)
		}
	}
}

// TestInconsistentProfileIsHarnessError: a profile declaring E+PD without a
// consumer endpoint is an error of the harness, not of the target.
func TestInconsistentProfileIsHarnessError(t *testing.T) {
	w := newFakeWorld(fakeMutant{}, 0)
	tg := target.NewStatic(fullProfile(), map[target.Role]target.Engine{target.RoleProducer: &fakeEngine{w, target.RoleProducer}})
	r := runCase(t, CasesForRule("SU-2")[0], tg)
	if got := r.outcome(); got != OutcomeError {
		t.Errorf("SU-2 with no consumer endpoint = %s; want %s", r, OutcomeError)
	}
}

// fakeMutantCase is one fake mutant: its name, the broken decision, the
// rules it breaks and the cases (function names) that must fail against it.
type fakeMutantCase struct {
	name    string
	m       fakeMutant
	rules   []string
	killers []string
}

// fakeMutants are the fake's mutants: each breaks one decision, which
// breaks rules (the first is the one it is named after), and each case of
// killers (function names) must fail against it.
var fakeMutants = []fakeMutantCase{
	{"replay allowed", fakeMutant{replayAllowed: true}, []string{"SU-1", "SU-2"}, []string{"SU1ConcurrentConsumesOneWins", "SU1TwoConsumerProcessesOneWins", "SU2ReplayRejected", "SU2ReleasedRejected"}},
	{"expiry ignored", fakeMutant{ignoreExpiry: true}, []string{"SU-2", "SU-3", "X-2"}, []string{"SU2ExpiredRejected", "SU3AbortAfterExpiry", "X2ExpiredEntryIsCollected"}},
	{"abort always ABORTED", fakeMutant{abortAlwaysAborted: true}, []string{"SU-3"}, []string{"SU3AbortReleasesOnce", "SU3AbortAfterConsume"}},
	{"no tag check", fakeMutant{noTagCheck: true}, []string{"SU-5"}, []string{"SU5ForgedReferenceRejected", "SU5TamperedReferencesRejected"}},
	{"abort skips the tag", fakeMutant{abortNoTagCheck: true}, []string{"SU-5"}, []string{"SU5ForgedReferenceRejected", "SU5TamperedReferencesRejected"}},
	{"ids from a counter", fakeMutant{idFromCounter: true}, []string{"SU-5"}, []string{"SU5ReferenceIDsUnguessable"}},
	{"path ids looked up", fakeMutant{pathIDAccepted: true}, []string{"SU-5"}, []string{"SU5PathReferencesRejected"}},
	{"no size check", fakeMutant{noSizeCheck: true}, []string{"L-1"}, []string{"L1PaddedReferenceAtTheBound"}},
	{"video accepted", fakeMutant{videoAccepted: true}, []string{"L-3"}, []string{"L3VideoAudioUnimplemented"}},
	{"producer generates", fakeMutant{producerGenerates: true}, []string{"L-4"}, []string{"L4WrongRoleRejected"}},
	{"quota ignored", fakeMutant{quotaIgnored: true}, []string{"L-5"}, []string{"L5ProducerQuotaEnforced"}},
	{"url INVALID_ARGUMENT", fakeMutant{urlInvalid: true}, []string{"L-6"}, []string{"L6MalformedMediaRejected"}},
	{"bombs decoded", fakeMutant{bombDecoded: true}, []string{"L-6"}, []string{"L6MalformedMediaRejected"}},
	{"backend unchecked", fakeMutant{backendUnchecked: true}, []string{"N-1"}, []string{"N1UnacceptedBackendRejected"}},
	{"spent before backend", fakeMutant{spentBeforeBackend: true}, []string{"N-1"}, []string{"N1UnacceptedBackendRejected"}},
	{"shutdown any id", fakeMutant{shutdownAnyID: true}, []string{"S-1"}, []string{"S1ShutdownIdentityChecked"}},
	{"usage counts encoder", fakeMutant{usageCountsEncoder: true}, []string{"B-1"}, []string{"B1DisaggregatedMatchesBaseline", "B1RequiredFormatsMatchBaseline"}},
	{"cache keyed by text", fakeMutant{textKeyedCache: true}, []string{"B-2"}, []string{"B2DifferentImagesDifferentAnswers", "B2NearImagesDifferentAnswers"}},
	{"uuid is identity", fakeMutant{uuidIsIdentity: true}, []string{"H-5"}, []string{"H5UUIDIsNotContentHash"}},
	{"hash case folded", fakeMutant{hashCaseFolded: true}, []string{"H-3", "SU-5"}, []string{"H3MalformedHashRejected", "SU5TamperedReferencesRejected"}},
	{"id from content", fakeMutant{idFromContent: true}, []string{"SU-6"}, []string{"SU6SamePublishedTwiceIndependent"}},
	{"no expiry collection", fakeMutant{noCollection: true}, []string{"X-2"}, []string{"X2ExpiredEntryIsCollected", "X2ConsumeRacesExpiry"}},
	{"hash over wire bytes", fakeMutant{hashWireBytes: true}, []string{"H-1", "H-4"}, []string{"H1ContentHashFromDecodedPixels", "H4PixelEqualMediaHashEqual"}},
	{"claims kept per consumer process", fakeMutant{perConsumerClaims: true}, []string{"SU-1"}, []string{"SU1TwoConsumerProcessesOneWins"}},
	{"published hash without dimensions", fakeMutant{hashWithoutDims: true}, []string{"B-2", "H-1"}, []string{"B2NearImagesDifferentAnswers", "H1ContentHashFromDecodedPixels"}},
}

// concurrently runs the jobs, at most 32 at a time (the cases mostly wait
// on TTLs and settle timeouts, so they overlap far better than
// t.Parallel's GOMAXPROCS allows), and returns their results in order.
func concurrently[T any](jobs []func() T) []T { return concurrentlyN(32, jobs) }

// concurrentlyN runs jobs, n at a time, and returns their results in order.
func concurrentlyN[T any](n int, jobs []func() T) []T {
	out := make([]T, len(jobs))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = job()
		}()
	}
	wg.Wait()
	return out
}

// boundsHealthWhileLoaded names the cases (by function) that want every
// Health answer within a wall-clock bound while they load the engine
// (healthAnswerBound); TestMutantsKilledAndFailuresNameOnlyTheirRules runs
// them after the others, a few at a time.
var boundsHealthWhileLoaded = map[string]bool{
	"SE4ScanBombsDoNotStallOtherPublishes":  true,
	"SE4DecodeBudgetBoundsConcurrentImages": true,
}

// quoted matches a double-quoted Go string in a message: an engine's own
// status message, a prompt or a file name, none of them the case's words.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// namedRule matches a CONTRACT rule ID in a message.
var namedRule = regexp.MustCompile(`\b(?:SU|Q|C|R|H|L|N|S|B|SE|X)-[0-9]+\b`)

// rulesNamed returns the rule IDs msg names outside quoted strings.
func rulesNamed(msg string) []string {
	return namedRule.FindAllString(quoted.ReplaceAllString(msg, `""`), -1)
}

// TestMutantsKilledAndFailuresNameOnlyTheirRules runs every case against
// the conforming fake and against each fake mutant (each case in a world
// of its own, all at once): every killer a mutant names fails against it;
// any other case fails only when the mutant breaks its rule or one Related
// to it (Consequences); and no failure message names a rule other than the
// case's own or a Related one. It is what keeps every case asserting its
// own rule: an assertion that belongs to another rule shows up as a
// failure outside the table.
func TestMutantsKilledAndFailuresNameOnlyTheirRules(t *testing.T) {
	t.Parallel()
	worlds := append([]fakeMutantCase{{name: "conforming"}}, fakeMutants...)
	byFunc := map[string]Case{}
	for _, c := range Cases() {
		if !c.UnderFaults && !c.ViaPrefill { // the copies run the same function
			byFunc[funcName(c)] = c
		}
	}
	for name := range boundsHealthWhileLoaded {
		if _, ok := byFunc[name]; !ok {
			t.Errorf("boundsHealthWhileLoaded names %s, which is not a registered case", name)
		}
	}
	for _, w := range fakeMutants {
		for _, name := range w.killers {
			if c, ok := byFunc[name]; !ok {
				t.Errorf("mutant %q names killer %s, which is not a registered case", w.name, name)
			} else if !slices.Contains(w.rules, c.Rule) {
				t.Errorf("mutant %q names killer %s of rule %s; it declares %v", w.name, name, c.Rule, w.rules)
			}
		}
	}
	type run struct {
		world fakeMutantCase
		c     Case
		r     *recorder
	}
	for _, im := range append(fixtures.Images(), fixtures.PixelEqualPairs()[3][1]) {
		_, _, _ = decodeCached(im.Data) // decoded once, not by 32 worlds at once
	}
	var jobs, timedJobs []func() run
	for _, w := range worlds {
		for _, c := range byFunc {
			// A world per case: a mutant case may poison it (a Shutdown S-1 should have refused).
			job := func() run {
				return run{w, c, runCase(t, c, newFakeWorld(w.m, fullProfile().ProducerQuotaBytes).target(fullProfile()))}
			}
			if boundsHealthWhileLoaded[funcName(c)] {
				timedJobs = append(timedJobs, job)
			} else {
				jobs = append(jobs, job)
			}
		}
	}
	// The cases that bound Health's answers in wall-clock time run after
	// the others, a few at a time: among 32 cases at once under -race on
	// 2 loaded cores, a Health answer took 2.9 s (stop 23), a failure of
	// the machine's, not of any world's.
	runs := append(concurrently(jobs), concurrentlyN(4, timedJobs)...)
	killed := 0
	for _, x := range runs {
		if slices.Contains(x.world.killers, funcName(x.c)) {
			if got := x.r.outcome(); got != OutcomeFailed {
				t.Errorf("%s against mutant %q = %s; want %s", x.c.Name, x.world.name, x.r, OutcomeFailed)
			}
			killed++
		}
		if !x.r.failed {
			continue
		}
		if !slices.ContainsFunc(x.world.rules, func(rule string) bool { return Related(x.c.Rule, rule) }) {
			t.Errorf("%s failed against %q, which breaks %v: neither its rule nor a documented consequence (Consequences): %s", x.c.Name, x.world.name, x.world.rules, x.r)
		}
		for _, msg := range x.r.msgs {
			for _, named := range rulesNamed(msg) {
				if !Related(x.c.Rule, named) {
					t.Errorf("%s failure against %q names %s, which is neither its rule nor a documented consequence: %s", x.c.Name, x.world.name, named, msg)
				}
			}
		}
	}
	t.Logf("%d worlds x %d cases; %d killer runs", len(worlds), len(byFunc), killed)
}

// TestRulesNamed: rule IDs in quoted engine messages are not the case's words.
func TestRulesNamed(t *testing.T) {
	msg := `C-3 GetLoad = code INVALID_ARGUMENT ("SU-2 spent \"B-1\""), 0 tokens; want X-2 (H-4)`
	if got := rulesNamed(msg); !slices.Equal(got, []string{"C-3", "X-2", "H-4"}) {
		t.Errorf("rulesNamed(%q) = %v; want [C-3 X-2 H-4]", msg, got)
	}
}

// TestConsequencesAreDocumented: every consequence names two rules of the
// contract's levels, each pair once, with a reason.
func TestConsequencesAreDocumented(t *testing.T) {
	known := map[string]bool{}
	for _, rules := range RulesByLevel() {
		for _, r := range rules {
			known[r] = true
		}
	}
	seen := map[[2]string]bool{}
	for _, c := range Consequences() {
		if !known[c.Rule] || !known[c.Mentions] || c.Rule == c.Mentions || c.Why == "" {
			t.Errorf("consequence %+v: want two different rules of RulesByLevel and a reason", c)
		}
		key := [2]string{min(c.Rule, c.Mentions), max(c.Rule, c.Mentions)}
		if seen[key] {
			t.Errorf("consequence %s/%s listed twice", c.Rule, c.Mentions)
		}
		seen[key] = true
	}
	if !Related("SU-1", "SU-2") || !Related("SU-2", "SU-1") || Related("SU-1", "B-1") || !Related("L-3", "L-3") {
		t.Errorf("Related is not the symmetric closure of Consequences")
	}
}

// TestDestructiveShutdownAcceptsRepeatAsUnavailable: after an accepted
// Shutdown the repeat may find the process gone (UNAVAILABLE); the case
// accepts that and nothing else.
func TestShutdownAcceptedLeavesEngineDraining(t *testing.T) {
	w := newFakeWorld(fakeMutant{}, 0)
	tg := w.target(fullProfile())
	id := w.ids[target.RoleConsumer]
	r := runCase(t, CasesForRule("S-1")[1], tg)
	if r.outcome() != OutcomePassed {
		t.Fatalf("S-1 accepted = %s; want passed", r)
	}
	if !slices.Equal(w.restarted, []target.Role{target.RoleConsumer}) || w.ids[target.RoleConsumer] == id {
		t.Errorf("after the destructive S-1 case the fake restarted %v (consumer id %s, was %s); want the consumer it shut down, once", w.restarted, w.ids[target.RoleConsumer], id)
	}
	if w.down[target.RoleProducer] || w.down[target.RoleBaseline] || w.down[target.RoleConsumer] {
		t.Errorf("S-1 accepted left roles down: %v", w.down)
	}
}

// TestShutdownAcceptedNeedsRestart: against a target that cannot restart
// (engines started by hand, no launch section) the accepted Shutdown is
// not verifiable, and nothing is shut down (CONTRACT section 5: Core needs
// a restart for S-1).
func TestShutdownAcceptedNeedsRestart(t *testing.T) {
	w := newFakeWorld(fakeMutant{}, 0)
	inner := w.target(fullProfile()).(restartableTarget).Target // the Static inside: no Restarter
	p := inner.Profile()
	p.Restarts = false // and no launch section
	tg := profiledTarget{inner, p}
	for _, c := range Cases() {
		if !c.Destructive || c.Rule == "S-3" || c.Needs.Feature != "" { // S-3 is about cuda_ipc, a feature rule about an undeclared feature: not applicable to the fake
			continue
		}
		r := runCase(t, c, tg)
		if r.outcome() != OutcomeNotVerifiable || !strings.Contains(strings.Join(r.msgs, " "), "launch section") {
			t.Errorf("%s without a restart = %s; want not verifiable naming the launch section", c.Name, r)
		}
	}
	if len(w.down) > 0 && (w.down[target.RoleConsumer] || w.down[target.RoleProducer] || w.down[target.RoleBaseline]) {
		t.Errorf("a case without a restart shut an engine down: %v", w.down)
	}
}

// profiledTarget is a target with another profile.
type profiledTarget struct {
	target.Target
	p target.Profile
}

func (t profiledTarget) Profile() target.Profile { return t.p }

// TestMixedPairDecisions: when the producer and the consumer are two
// implementations on models of their own (Env.ModelsDiffer), the cases
// that compare a topology's answers with the baseline (the B rules, H-4,
// H-5) are not applicable and say why, and every other case (the handoff
// rules SU, L, N, S, H-3 among them) is decided as for one implementation.
func TestMixedPairDecisions(t *testing.T) {
	p := fullProfile()
	p.Topologies = []string{target.TopologyEPD, target.TopologyEPPD}
	same := Env{Profile: p, Roles: EveryRole(), CanRestart: true, CanInjectFaults: true}
	mixed := same
	mixed.ModelsDiffer = "the producer is a (model \"m1\", preset \"p1\") and the consumer b (model \"m2\", preset \"p2\")"
	compared := map[string]bool{}
	for _, c := range Cases() {
		o1, _ := c.Decide(same)
		o2, why := c.Decide(mixed)
		if c.Needs.Baseline && c.Needs.Topology != "" {
			compared[c.Rule] = true
			if o1 == "" && (o2 != OutcomeNotApplicable || !strings.Contains(why, "m2")) {
				t.Errorf("%s: mixed pair decided %q (%s); want not applicable naming both models", c.Name, o2, why)
			}
			if !strings.Contains(c.Needs.Discoveries(), "one model") {
				t.Errorf("%s: Discoveries %q does not tell the dry run it may be not applicable for a mixed pair", c.Name, c.Needs.Discoveries())
			}
			continue
		}
		if o1 != o2 {
			t.Errorf("%s: decided %q for one implementation but %q (%s) for a mixed pair", c.Name, o1, o2, why)
		}
	}
	for _, r := range []string{"B-1", "B-2", "H-4", "H-5"} {
		if !compared[r] {
			t.Errorf("no case of %s compares answers with the baseline", r)
		}
	}
	for _, r := range []string{"SU-1", "SU-2", "SU-3", "SU-4", "SU-5", "L-1", "L-3", "L-4", "L-5", "L-6", "N-1", "N-2", "S-1", "H-3"} {
		if compared[r] {
			t.Errorf("a case of the handoff rule %s compares with the baseline: it would not run on a mixed pair", r)
		}
	}
}

// TestFakeJPEGScans: the fake counts a progressive JPEG's scans (DC and
// AC), and every fixture JPEG is within its scan bound.
func TestFakeJPEGScans(t *testing.T) {
	for _, c := range []struct{ comps, ac, want int }{{1, 0, 1}, {1, 31, 32}, {3, 10, 33}, {1, 18000, 18001}} {
		if got := fakeJPEGScans(fixtures.ProgressiveJPEG(64, 48, c.comps, 1, c.ac)); got != c.want {
			t.Errorf("fakeJPEGScans(%d components, %d AC rounds) = %d; want %d", c.comps, c.ac, got, c.want)
		}
	}
	for _, im := range fixtures.Images() {
		if im.Format == "jpeg" {
			if n := fakeJPEGScans(im.Data); n < 1 || n > fakeMaxJPEGScans {
				t.Errorf("fixture %s: %d scans; want 1..%d", im.Name, n, fakeMaxJPEGScans)
			}
		}
	}
}
