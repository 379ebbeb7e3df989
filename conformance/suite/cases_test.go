package suite

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
)

// recorder is a TB that records what a case reports instead of failing the
// test: Fatalf and Skipf end the case's goroutine (runtime.Goexit), as
// *testing.T does.
type recorder struct {
	mu      sync.Mutex
	failed  bool
	skipped bool
	msgs    []string
	logs    []string
}

func (r *recorder) Helper() {}

func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) outcome() Outcome { return OutcomeOf(r.failed, r.skipped, r.msgs...) }

func (r *recorder) String() string {
	return fmt.Sprintf("%s: %s", r.outcome(), strings.Join(r.msgs, "\n\t"))
}

// runCase runs c against tg in its own goroutine (so Goexit ends only the
// case) and returns what it reported.
func runCase(t *testing.T, c Case, tg target.Target) *recorder {
	t.Helper()
	r := &recorder{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Execute(ctx, r, tg)
	}()
	<-done
	return r
}

// fullProfile declares everything the cases can use; the quota holds 10 entries.
func fullProfile() target.Profile {
	return target.Profile{
		Name: "fake", Topologies: []string{"E+PD"}, Backends: []string{fakeBackend},
		Observables: true, Destructive: true, ProducerQuotaBytes: 10 * fakeEntryBytes,
		ReferenceFormat: FormatBatonJSONv1, CaseTimeout: 30 * time.Second,
	}
}

// bareProfile declares only the topology: no observables, format, quota or
// permission to shut down.
func bareProfile() target.Profile {
	return target.Profile{Name: "fake-bare", Topologies: []string{"E+PD"}, CaseTimeout: 30 * time.Second}
}

// eppdRules are the cases about E+P+D, not applicable to the fake.
func isEPPD(c Case) bool {
	for _, l := range c.Labels {
		if l == LabelEPPD {
			return true
		}
	}
	return false
}

// TestCasesPassOnConformingFake runs every case, in registry order, against
// one conforming fake (destructive ones against a fresh one): each passes,
// except the E+P+D cases, which are not applicable.
func TestCasesPassOnConformingFake(t *testing.T) {
	shared := newFakeWorld(fakeMutant{}, fullProfile().ProducerQuotaBytes).target(fullProfile())
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			tg := shared
			if c.Destructive {
				tg = newFakeWorld(fakeMutant{}, fullProfile().ProducerQuotaBytes).target(fullProfile())
			}
			r := runCase(t, c, tg)
			want := wantOnFake(c, fullProfile())
			if got := r.outcome(); got != want {
				t.Errorf("%s = %s; want %s", c.Name, r, want)
			}
		})
	}
}

// wantOnFake is the outcome a case must have against the conforming fake
// declaring profile p: E+P+D cases are not applicable; cases needing the
// fault proxy, test hooks (the fake implements none: the e2e runs check
// those cases against the reference engine), observables the profile does
// not declare, or destruction it does not allow are not verifiable, and so
// is H-2 (no black-box path); the rest pass.
func wantOnFake(c Case, p target.Profile) Outcome {
	switch {
	case isEPPD(c), !FeaturesDeclared(p, c.Labels):
		return OutcomeNotApplicable // an E+P+D copy; a feature rule's case, the feature undeclared
	case slices.Contains(c.Labels, LabelNeedsFaultProxy) && slices.Equal(p.Backends, []string{sharedDirBackend}),
		slices.Contains(c.Labels, LabelNeedsTransfer) && slices.Equal(p.Backends, []string{sharedDirBackend}):
		return OutcomeNotApplicable // no transfer crosses: nothing to fault, nothing dialled
	case slices.Contains(c.Labels, LabelNeedsTCP) && !slices.Contains(p.Backends, "tcp"):
		return OutcomeNotApplicable // only a tcp producer dials a consumer agent
	case c.Rule == "R-1",
		slices.Contains(c.Labels, LabelNeedsFaultProxy),
		slices.Contains(c.Labels, LabelNeedsTestHooks) && !p.TestHooks,
		slices.Contains(c.Labels, LabelNeedsObservables) && !p.Observables,
		c.Destructive && !p.Destructive && c.Rule != "S-1":
		return OutcomeNotVerifiable
	}
	return OutcomePassed
}

// TestCasesWithBareProfile runs every case against a fake whose profile
// declares nothing optional: the cases needing the format, the quota or
// destruction are not verifiable (L-1 is format-agnostic: it passes), the
// rest pass on the wire alone.
func TestCasesWithBareProfile(t *testing.T) {
	notVerifiable := map[string]bool{
		"SU5ReferenceIDsUnguessable": true,
		"SU5ForgedReferenceRejected": true,
		"L5ProducerQuotaEnforced":    true,
		"H3MalformedHashRejected":    true,
		"S1ShutdownAccepted":         true,
		// No untrusted_host: the harness has no port it knows the target distrusts.
		"SE3UntrustedProducerEndpointRefused": true,
	}
	shared := newFakeWorld(fakeMutant{}, 0).target(bareProfile())
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			r := runCase(t, c, shared)
			want := wantOnFake(c, bareProfile())
			if want == OutcomePassed && notVerifiable[funcName(c)] {
				want = OutcomeNotVerifiable
			}
			if got := r.outcome(); got != want {
				t.Errorf("%s = %s; want %s", c.Name, r, want)
			}
		})
	}
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

// TestMutantsKilled: each mutant of the fake breaks one decision, and the
// named cases must fail against it.
func TestMutantsKilled(t *testing.T) {
	tests := []struct {
		name   string
		m      fakeMutant
		killer []string // case function names that must fail
	}{
		{"replay allowed", fakeMutant{replayAllowed: true}, []string{"SU1ConcurrentConsumesOneWins", "SU2ReplayRejected", "SU2ReleasedRejected", "SU3AbortReleasesOnce"}},
		{"expiry ignored", fakeMutant{ignoreExpiry: true}, []string{"SU2ExpiredRejected", "SU3AbortAfterExpiry"}},
		{"abort always ABORTED", fakeMutant{abortAlwaysAborted: true}, []string{"SU3AbortReleasesOnce", "SU3AbortAfterConsume"}},
		{"no tag check", fakeMutant{noTagCheck: true}, []string{"SU4MalformedConsumeRejected", "SU4MalformedAbortRejected", "SU5ForgedReferenceRejected"}},
		{"abort skips the tag", fakeMutant{abortNoTagCheck: true}, []string{"SU4MalformedAbortRejected"}},
		{"ids from a counter", fakeMutant{idFromCounter: true}, []string{"SU5ReferenceIDsUnguessable"}},
		{"path ids looked up", fakeMutant{pathIDAccepted: true}, []string{"SU5PathReferencesRejected"}},
		{"no size check", fakeMutant{noSizeCheck: true}, []string{"L1OversizeReferenceRejected"}},
		{"video accepted", fakeMutant{videoAccepted: true}, []string{"L3VideoAudioUnimplemented"}},
		{"producer generates", fakeMutant{producerGenerates: true}, []string{"L4WrongRoleRejected"}},
		{"quota ignored", fakeMutant{quotaIgnored: true}, []string{"L5ProducerQuotaEnforced"}},
		{"url INVALID_ARGUMENT", fakeMutant{urlInvalid: true}, []string{"L6MalformedMediaRejected"}},
		{"bombs decoded", fakeMutant{bombDecoded: true}, []string{"L6MalformedMediaRejected"}},
		{"backend unchecked", fakeMutant{backendUnchecked: true}, []string{"N1UnacceptedBackendRejected"}},
		{"spent before backend", fakeMutant{spentBeforeBackend: true}, []string{"N1UnacceptedBackendRejected"}},
		{"text touches encoder", fakeMutant{textTouchesEncoder: true}, []string{"N2TextOnlyBypassesEncoder"}},
		{"shutdown any id", fakeMutant{shutdownAnyID: true}, []string{"S1ShutdownIdentityChecked"}},
		{"usage counts encoder", fakeMutant{usageCountsEncoder: true}, []string{"B1DisaggregatedMatchesBaseline"}},
		{"cache keyed by text", fakeMutant{textKeyedCache: true}, []string{"B2DifferentImagesDifferentAnswers"}},
		{"uuid is identity", fakeMutant{uuidIsIdentity: true}, []string{"H5UUIDIsNotContentHash"}},
		{"hash case folded", fakeMutant{hashCaseFolded: true}, []string{"H3MalformedHashRejected"}},
		{"id from content", fakeMutant{idFromContent: true}, []string{"SU6SamePublishedTwiceIndependent"}},
		{"no expiry collection", fakeMutant{noCollection: true}, []string{"X2ExpiredEntryIsCollected"}},
		{"hash over wire bytes", fakeMutant{hashWireBytes: true}, []string{"H1ContentHashFromDecodedPixels", "H4PixelEqualMediaHashEqual"}},
	}
	byFunc := map[string]Case{}
	for _, c := range Cases() {
		if !c.UnderFaults && !c.ViaPrefill { // the copies run the same function
			byFunc[funcName(c)] = c
		}
	}
	for _, tt := range tests {
		for _, name := range tt.killer {
			c, ok := byFunc[name]
			if !ok {
				t.Fatalf("no registered case %s", name)
			}
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				tg := newFakeWorld(tt.m, fullProfile().ProducerQuotaBytes).target(fullProfile())
				r := runCase(t, c, tg)
				if got := r.outcome(); got != OutcomeFailed {
					t.Errorf("%s against mutant %q = %s; want %s", c.Name, tt.name, r, OutcomeFailed)
				} else {
					t.Logf("killed: %s", r.msgs[0])
				}
			})
		}
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
	tg := w.target(fullProfile()).(restartableTarget).Target // the Static inside: no Restarter
	for _, c := range Cases() {
		if !c.Destructive || c.Rule == "S-3" { // S-3 is about cuda_ipc: not applicable to the fake
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
