package suite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
)

// Labels of the Faults-level cases.
const (
	// LabelNeedsFaultProxy marks a case that needs the harness's fault proxy
	// between consumer and producer (Profile.FaultProxy and a target that
	// implements target.FaultInjector).
	LabelNeedsFaultProxy = "needs:fault-proxy"
	// LabelNeedsTestHooks marks a case that needs the baton.* test hooks.
	LabelNeedsTestHooks = "needs:test-hooks"
	// LabelUnderFaults marks a Core or Lifecycle case run again at the
	// Faults level with the fault proxy delaying transfer replies.
	LabelUnderFaults = "under-faults"
)

// The faults a Core or Lifecycle case runs under at the Faults level
// (CONTRACT section 5: "every Core and Lifecycle rule again under injected
// faults"): every second TransferEncoderCache reply is held
// underFaultsDelay, so transfers finish late and out of order, but each
// outcome stays certain. Faults that make an outcome uncertain (a lost
// request or reply, a cut connection) end in quarantine by Q-1, which the
// Q-1..Q-4 cases check on their own.
const (
	underFaultsDelay  = 120 * time.Millisecond
	underFaultsCalls  = 512
	underFaultsSuffix = " [again under injected faults: transfer replies delayed]"
)

// underFaults returns a Faults-level copy of every non-destructive E+PD
// Core and Lifecycle case of cs: the same rule and checks, run with the
// fault proxy delaying transfer replies (underFaultsDelay). Each copy needs
// the fault proxy; its rule's verdict counts it at the Faults level.
// copyExcluded lists the cases left out, with why.
func underFaults(cs []Case) []Case {
	var out []Case
	for _, c := range cs {
		if c.Destructive || (c.Level != LevelCore && c.Level != LevelLifecycle) ||
			c.Needs.Topology != target.TopologyEPD || c.Needs.FaultProxy || copyExcluded(c, underFaultsExcluded) != "" {
			continue
		}
		c.Name += underFaultsSuffix
		c.Level = LevelFaults
		c.Needs = c.Needs.with(func(n *Needs) { n.FaultProxy = true })
		c.Labels = append(slices.Clone(c.Labels), LabelUnderFaults)
		c.UnderFaults = true
		out = append(out, c)
	}
	return out
}

// copyExcluded returns why c gets no copy of the kind excluded lists
// (by case name), or "" when it does: a volume case and a case that needs
// a second consumer process never get one.
func copyExcluded(c Case, excluded map[string]string) string {
	switch {
	case c.Needs.Volume:
		return "a volume case runs once, against the plain topology"
	case c.Needs.SecondConsumer:
		return "the second consumer is a PD process, raced against the first on the plain topology"
	}
	return excluded[c.Name]
}

// underFaultsExcluded are the E+PD cases without an under-faults copy, with why.
var underFaultsExcluded = map[string]string{
	"SU-5 a reference altered in any byte, truncated, extended or re-addressed consumes and releases nothing": "it presents hundreds of altered references, each a transfer the fault proxy would delay; SU-5's other cases run under faults",
}

// underFaultsPattern is the fault of each of the next underFaultsCalls
// transfers: none, then a delayed reply, and so on.
func underFaultsPattern() []target.TransferFault {
	pattern := make([]target.TransferFault, underFaultsCalls)
	for i := range pattern {
		pattern[i] = target.FaultNone
		if i%2 == 1 {
			pattern[i] = target.FaultDelay
		}
	}
	return pattern
}

// Execute runs the case against tg: first it decides from c.Needs whether
// the case runs at all (Decide; not applicable, not verifiable or a
// harness error end it there, with Decide's reason), then c.Run, under the
// fault proxy's injected faults for an UnderFaults copy, with P (and D) as
// the consumer for a ViaPrefill copy. Every binding (Ginkgo,
// conformance.Run, baton check) runs cases through it.
func (c Case) Execute(ctx context.Context, t TB, tg target.Target) {
	if c.ViaPrefill {
		ctx = context.WithValue(ctx, viaPrefillKey{}, true)
	}
	c.decideBeforeRun(t, tg)
	if !c.UnderFaults {
		c.Run(ctx, t, tg)
		return
	}
	f := needFaults(ctx, t, tg)
	f.inject(underFaultsDelay, underFaultsPattern()...)
	defer f.inject(0)
	c.Run(ctx, t, tg)
}

// faultImage is the fixture the Faults-level cases hand off.
const faultImage = "video-001.png"

// stuckTransfer is how long a FaultDelay holds a transfer reply in the
// Q-5, C-4 and C-5 cases: long enough to act while the transfer is stuck,
// short of the consumer's transfer deadline.
const stuckTransfer = 1500 * time.Millisecond

// faultHarness is a harness with the fault proxy and, when the target has
// one, a way to replace poisoned instances.
type faultHarness struct {
	*harness
	faults  target.FaultInjector
	restart target.Restarter
	tg      target.Target
	// entered is ObservableQuarantineEntered of "producer" and "consumer"
	// as the case began, for the engines that offer it.
	entered map[string]float64
}

// needFaults returns the harness of a Faults-level E+PD case (Needs
// FaultProxy: Case.Execute has checked the fault proxy and the restarts).
func needFaults(ctx context.Context, t TB, tg target.Target) *faultHarness {
	t.Helper()
	h := needEPD(ctx, t, tg)
	fi, okFI := tg.(target.FaultInjector)
	rs, okRS := tg.(target.Restarter)
	if !okFI || !okRS {
		HarnessError(t, "the case needs a target that injects faults and restarts instances (Needs.FaultProxy): run it through Case.Execute")
	}
	f := &faultHarness{harness: h, faults: fi, restart: rs, tg: tg, entered: map[string]float64{}}
	for who, e := range map[string]target.Engine{"producer": h.prod, "consumer": h.cons} {
		if n, ok := h.quarantinesEntered(e); ok {
			f.entered[who] = n
		}
	}
	return f
}

// poisoned restarts roles at the end of a case that may have quarantined them.
func (f *faultHarness) poisoned(roles ...target.Role) func() {
	return func() {
		f.cleanup()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), time.Minute)
		defer cancel()
		for _, r := range roles {
			if r == target.RoleConsumer && f.viaPrefill {
				r = target.RolePrefill // the E+P+D copy: P is the consumer
			}
			if err := f.restart.Restart(ctx, r); err != nil {
				f.t.Errorf("harness error: restart %s after the case: %v", r, err)
			}
		}
	}
}

func (f *faultHarness) inject(delay time.Duration, faults ...target.TransferFault) {
	f.t.Helper()
	if err := f.faults.SetTransferFaults(target.MethodTransferEncoderCache, delay, faults...); err != nil {
		HarnessError(f.t, "set transfer faults: %v", err)
	}
}

// healthState returns e's Health state and checks.
func (f *faultHarness) healthState(e target.Engine) (pb.HealthState, string) {
	resp, err := e.Health(f.ctx)
	if err != nil {
		return pb.HealthState_HEALTH_STATE_UNSPECIFIED, statusString(err)
	}
	return resp.GetState(), healthChecks(resp)
}

// expectQuarantined checks Q-4 on e: NOT_READY with the encoder_cache check,
// and (observables) a quarantined buffer.
func (f *faultHarness) expectQuarantined(who string, e target.Engine) {
	f.t.Helper()
	st, checks := f.healthState(e)
	if st != pb.HealthState_HEALTH_STATE_NOT_READY {
		f.quarantineNotSeen(who, e, fmt.Sprintf("Health(%s) after an uncertain transfer = %s%s", who, st, checks))
		return
	}
	if c, ok := f.optionalCounters(who, e); ok && c[ObservableQuarantineBuffers] < 1 {
		f.t.Errorf("GetLoad(%s) %s = %g after an uncertain transfer; want >= 1", who, ObservableQuarantineBuffers, c[ObservableQuarantineBuffers])
	}
}

// quarantineNotSeen judges a quarantine the case expected and did not see
// (seen: what it saw instead). Q-6 lets a side end its quarantine as soon
// as it has its proof (a consumer that revoked its buffers and closed the
// connections that carried the transfer), possibly before the case looked.
// An engine that offers ObservableQuarantineEntered shows whether it
// entered one: it passes when the count rose and nothing is quarantined
// any more, and fails when it did not rise. Without it an ended quarantine
// and none at all look alike: the case ends `not verifiable`, never
// `failed`.
func (f *faultHarness) quarantineNotSeen(who string, e target.Engine, seen string) {
	f.t.Helper()
	before, offered := f.entered[who]
	if !offered {
		NotVerifiable(f.t, fmt.Sprintf("%s; want NOT_READY with check encoder_cache (Q-4), unless Q-6 already ended the quarantine: the engine does not offer %s, so an ended quarantine cannot be told from none", seen, ObservableQuarantineEntered))
	}
	now, ok := f.quarantinesEntered(e)
	if ok && now > before {
		if c, ok := f.optionalCounters(who, e); !ok || c[ObservableQuarantineBuffers] == 0 {
			f.t.Logf("%s: the quarantine was entered (%s %g -> %g) and Q-6 already ended it", seen, ObservableQuarantineEntered, before, now)
			return
		}
	}
	f.t.Errorf("%s, %s %g -> %g; want NOT_READY with check encoder_cache (Q-4), or a quarantine entered that Q-6 already ended", seen, ObservableQuarantineEntered, before, now)
}

// waitInflight polls the consumer's receives in flight until it is n (the
// transfer reached the proxy) or the case ends. Needs observables.
func (f *faultHarness) waitInflight(n float64) {
	f.t.Helper()
	for {
		c := f.counters("consumer", f.cons)
		if c[ObservableReceivesInflight] == n {
			return
		}
		select {
		case <-f.ctx.Done():
			f.t.Fatalf("%s never reached %g (case context ended)", ObservableReceivesInflight, n)
		case <-time.After(10 * time.Millisecond): // polling an observable
		}
	}
}

// Q1LostReplyQuarantines: a transfer whose reply is lost after the producer
// acted leaves the consumer's buffers quarantined, never freed.
func Q1LostReplyQuarantines(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	defer f.poisoned(target.RoleConsumer)()
	ready := f.publish(fixture(t, faultImage))
	f.inject(0, target.FaultDropReply)
	res := f.consume(promptText(t, promptMarker), ready.GetRef())
	if res.Code() == codes.OK || len(res.TokenIDs()) > 0 {
		t.Errorf("%s with its reply lost = %s; want a failure and no token", consumeCall(ready.GetRef(), "reply dropped"), describe(res))
	}
	calls, err := f.faults.TransferCalls(ctx, target.MethodTransferEncoderCache, 1)
	if err != nil || len(calls) == 0 {
		HarnessError(t, "the fault proxy saw no TransferEncoderCache call: %v", err)
	}
	if !calls[0].UpstreamReached {
		t.Logf("note: the dropped call never reached the producer")
	}
	f.expectQuarantined("consumer", f.cons)
}

// Q2DefiniteRejectionReleases: a replayed reference over a transfer backend is
// a definite pre-write rejection: the consumer answers INVALID_ARGUMENT,
// releases its buffers and stays READY; a plain INVALID_ARGUMENT without the
// before-write trailer is still uncertain and quarantines.
func Q2DefiniteRejectionReleases(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	defer f.poisoned(target.RoleConsumer)()
	ready := f.publish(fixture(t, faultImage))
	if _, ok := f.consumeOK(promptText(t, promptMarker), ready.GetRef(), "first"); !ok {
		return
	}
	f.consumeRejected(promptText(t, promptMarker), ready.GetRef(), "replay", codes.InvalidArgument)
	if !f.expectReady("consumer", f.cons) {
		return
	}
	if c, ok := f.optionalCounters("consumer", f.cons); ok && c[ObservableQuarantineBuffers] != 0 {
		t.Errorf("Q-2 a definite rejection quarantined %g buffers; want 0", c[ObservableQuarantineBuffers])
	}
	// Another handoff's transfer is held in flight (short of the
	// consumer's deadline) across the uncertain one: the connections that
	// may have carried the uncertain request stay open while it lasts, so
	// the quarantine is still there to see (Q-6 may end it as soon as
	// they close: nothing reached the producer, so nothing is written and
	// a consumer that closes its own carriers ends it at once). The held
	// handoff is never cut by the other's quarantine.
	held := f.publish(fixture(t, faultImage))
	again := f.publish(fixture(t, faultImage))
	f.inject(stuckTransfer, target.FaultDelay, target.FaultInvalidArgument)
	heldReq := f.consumeRequest(promptText(t, promptMarker), held.GetRef())
	heldDone := make(chan *target.GenerateResult, 1)
	go func() {
		res, err := f.cons.Generate(f.ctx, heldReq)
		if err != nil {
			res = &target.GenerateResult{}
		}
		heldDone <- res
	}()
	if err := f.faults.TransferArrived(f.ctx, target.MethodTransferEncoderCache, 1); err != nil {
		t.Fatalf("the held handoff's transfer request never reached the producer: %v", err)
	}
	res := f.consume(promptText(t, promptMarker), again.GetRef())
	if res.Code() == codes.OK {
		t.Errorf("%s = %s; want a failure", consumeCall(again.GetRef(), "INVALID_ARGUMENT without trailer injected"), describe(res))
	}
	f.expectQuarantined("consumer", f.cons)
	if r := <-heldDone; r.Code() != codes.OK {
		t.Errorf("%s = %s; want OK (another's quarantine never cuts it)", consumeCall(held.GetRef(), "its transfer held in flight across another's uncertain outcome"), describe(r))
	}
}

// Q3FailureAfterRemovalQuarantinesSource: a WRITE that fails after the
// producer removed the entry quarantines the producer's source; its answer is
// never INVALID_ARGUMENT, and the reference stays spent.
func Q3FailureAfterRemovalQuarantinesSource(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	defer f.poisoned(target.RoleConsumer, target.RoleProducer)()
	ready := f.publish(fixture(t, faultImage))
	f.inject(0) // a fresh record of the calls: calls[0] below is this case's, not an earlier case's
	req := f.consumeRequest(promptText(t, promptMarker), ready.GetRef())
	req.Extra, _ = structpb.NewStruct(map[string]any{"baton.transfer_fail": true})
	res := f.generate(f.cons, req)
	if res.Code() == codes.OK || len(res.TokenIDs()) > 0 {
		t.Errorf("%s with the WRITE failing after removal = %s; want a failure and no token", consumeCall(ready.GetRef(), "baton.transfer_fail"), describe(res))
	}
	calls, err := f.faults.TransferCalls(ctx, target.MethodTransferEncoderCache, 1)
	if err != nil || len(calls) == 0 {
		HarnessError(t, "the fault proxy saw no TransferEncoderCache call: %v", err)
	}
	if calls[0].UpstreamCode == "INVALID_ARGUMENT" || calls[0].UpstreamCode == "OK" {
		t.Errorf("TransferEncoderCache after the entry left the table answered %s; want an error that is not INVALID_ARGUMENT (Q-3)", calls[0].UpstreamCode)
	}
	f.expectQuarantined("producer", f.prod)
	if st, checks := f.healthState(f.prod); st != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("Health(producer) after quarantining a source = %s%s; want NOT_READY", st, checks)
	}
}

// Q4QuarantineIsStickyAndRefusesHandoffs: once quarantined, the consumer
// stays NOT_READY while the quarantine lasts (a lost reply's quarantine
// lasts while the connections that carried the transfer are open: Q-6),
// refuses new handoffs with UNAVAILABLE, and still serves text-only
// requests.
func Q4QuarantineIsStickyAndRefusesHandoffs(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	defer f.poisoned(target.RoleConsumer)()
	first := f.publish(fixture(t, faultImage))
	f.inject(0, target.FaultDropReply)
	f.consume(promptText(t, promptMarker), first.GetRef())
	f.expectQuarantined("consumer", f.cons)
	second := f.publish(fixture(t, faultImage))
	f.consumeRejected(promptText(t, promptMarker), second.GetRef(), "after quarantine", codes.Unavailable)
	text := f.consumerAnswer(f.ctx, &pb.GenerateRequest{RequestId: newRequestID("q4-text"), Model: f.model, Input: &pb.GenerateRequest_Prompt{Prompt: promptText(t, promptTextOnly)}, Stopping: stopping()})
	expectTokens(t, "Generate(text-only) on a quarantined consumer", text)
	if st, checks := f.healthState(f.cons); st != pb.HealthState_HEALTH_STATE_NOT_READY {
		t.Errorf("Health(consumer) after more requests = %s%s; want NOT_READY (until Q-6 ends the quarantine)", st, checks)
	}
}

// stuckConsume starts a consume whose transfer reply the proxy holds for
// stuckTransfer, waits until the transfer is in flight, and returns the
// result channel and the consume's cancel.
func (f *faultHarness) stuckConsume(ref *pb.EncoderCacheRef) (<-chan *target.GenerateResult, context.CancelFunc) {
	f.inject(stuckTransfer, target.FaultDelay)
	ctx, cancel := context.WithCancel(f.ctx)
	out := make(chan *target.GenerateResult, 1)
	req := f.consumeRequest(promptText(f.t, promptMarker), ref)
	go func() {
		res, err := f.cons.Generate(ctx, req)
		if err != nil {
			res = &target.GenerateResult{}
		}
		out <- res
	}()
	if err := f.faults.TransferArrived(f.ctx, target.MethodTransferEncoderCache, 1); err != nil {
		f.t.Fatalf("the consumer's transfer request never reached the producer: %v", err)
	}
	return out, cancel
}

// Q5StuckTransferBlocksNothingElse: while one transfer is stuck, the
// consumer answers Health and serves a text-only request promptly.
func Q5StuckTransferBlocksNothingElse(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	defer f.poisoned(target.RoleConsumer)()
	ready := f.publish(fixture(t, faultImage))
	done, cancel := f.stuckConsume(ready.GetRef())
	defer cancel()
	hctx, hcancel := context.WithTimeout(ctx, stuckTransfer/3)
	_, err := f.cons.Health(hctx)
	hcancel()
	if err != nil {
		t.Errorf("Health(consumer) while a transfer is stuck = %s within %v; want an answer (no lock held across the transfer)", statusString(err), stuckTransfer/3)
	}
	tctx, tcancel := context.WithTimeout(ctx, stuckTransfer*2/3)
	text, err := f.cons.Generate(tctx, &pb.GenerateRequest{RequestId: newRequestID("q5-text"), Model: f.model, Input: &pb.GenerateRequest_Prompt{Prompt: promptText(t, promptTextOnly)}, Stopping: stopping()})
	tcancel()
	if err != nil || text.Code() != codes.OK {
		t.Errorf("Generate(text-only) while a transfer is stuck did not finish within %v: %v %v", stuckTransfer*2/3, err, describe(text))
	}
	res := f.onDecode(ctx, <-done, promptText(t, promptMarker))
	expectTokens(t, "the stuck consume once its reply arrives", res)
}

// C4CancelledConsumerWaitsForTheOutcome: a consumer cancelled during a
// transfer keeps its buffers until the outcome is known, then releases them.
func C4CancelledConsumerWaitsForTheOutcome(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	defer f.poisoned(target.RoleConsumer)()
	ready := f.publish(fixture(t, faultImage))
	arrived := time.Now()
	done, cancel := f.stuckConsume(ready.GetRef())
	cancel()
	<-done
	// The proxy holds the reply until arrived+stuckTransfer: until then the
	// outcome is unknown and the receive must stay in flight.
	for time.Since(arrived) < stuckTransfer-300*time.Millisecond {
		c := f.counters("consumer", f.cons)
		if c[ObservableReceivesInflight] != 1 {
			t.Errorf("C-4 %s = %g %v after the client cancelled, before the transfer's outcome was known; want 1 (buffers kept until the outcome)", ObservableReceivesInflight, c[ObservableReceivesInflight], time.Since(arrived).Round(time.Millisecond))
			break
		}
		f.waitMs(20, "polling the receive in flight")
	}
	if _, err := f.faults.TransferCalls(ctx, target.MethodTransferEncoderCache, 1); err != nil {
		HarnessError(t, "transfer never finished at the proxy: %v", err)
	}
	f.waitInflight(0)
	if c := f.counters("consumer", f.cons); c[ObservableQuarantineBuffers] != 0 {
		t.Errorf("C-4 a cancelled transfer that then succeeded quarantined %g buffers; want 0 (released)", c[ObservableQuarantineBuffers])
	}
	f.expectReady("consumer", f.cons)
}

// C5TextOnlyCancelNeverWaits: a cancelled text-only request never waits for
// encoder cleanup, and a slow transfer never takes the consumer offline.
func C5TextOnlyCancelNeverWaits(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	defer f.poisoned(target.RoleConsumer)()
	ready := f.publish(fixture(t, faultImage))
	done, cancel := f.stuckConsume(ready.GetRef())
	defer cancel()
	tctx, tcancel := context.WithCancel(ctx)
	start := time.Now()
	go func() { tcancel() }()
	_, _ = f.cons.Generate(tctx, &pb.GenerateRequest{RequestId: newRequestID("c5-text"), Model: f.model, Input: &pb.GenerateRequest_Prompt{Prompt: promptText(t, promptTextOnly)}, Stopping: stopping()})
	if waited := time.Since(start); waited > stuckTransfer*2/3 {
		t.Errorf("a cancelled text-only request returned after %v while a transfer was stuck; want promptly", waited)
	}
	if st, checks := f.healthState(f.cons); st != pb.HealthState_HEALTH_STATE_READY {
		t.Errorf("Health(consumer) during a slow transfer = %s%s; want READY", st, checks)
	}
	<-done
}

// faultCases are the Faults-level cases, in registry order.
func faultCases() []Case {
	n := EPD.with(func(n *Needs) { n.FaultProxy = true })
	return []Case{
		{Rule: "Q-1", Name: "Q-1 a lost transfer reply quarantines the consumer's buffers", Run: Q1LostReplyQuarantines, Needs: n},
		{Rule: "Q-2", Name: "Q-2 only INVALID_ARGUMENT with the before-write trailer releases the consumer's buffers", Run: Q2DefiniteRejectionReleases, Needs: n},
		{Rule: "Q-3", Name: "Q-3 a WRITE failing after removal quarantines the producer's source, never INVALID_ARGUMENT", Run: Q3FailureAfterRemovalQuarantinesSource, Needs: n.with(func(n *Needs) { n.TestHooks = true })},
		{Rule: "Q-4", Name: "Q-4 a quarantined consumer is NOT_READY, refuses handoffs, serves text", Run: Q4QuarantineIsStickyAndRefusesHandoffs, Needs: n},
		{Rule: "Q-5", Name: "Q-5 a stuck transfer blocks neither Health nor other requests", Run: Q5StuckTransferBlocksNothingElse, Needs: n},
		{Rule: "C-4", Name: "C-4 a consumer cancelled mid-transfer keeps its buffers until the outcome, then releases", Run: C4CancelledConsumerWaitsForTheOutcome, Needs: n.with(func(n *Needs) { n.Observables = true })},
		{Rule: "C-5", Name: "C-5 a cancelled text-only request never waits for a stuck transfer", Run: C5TextOnlyCancelNeverWaits, Needs: n},
	}
}

// viaPrefillKey marks the context of an E+P+D copy of a consumer case.
type viaPrefillKey struct{}

// viaPrefill reports whether ctx runs an E+P+D copy (Case.ViaPrefill).
func viaPrefill(ctx context.Context) bool {
	v, _ := ctx.Value(viaPrefillKey{}).(bool)
	return v
}

// eppdSuffix ends the name of an E+P+D copy of a consumer case.
const eppdSuffix = " [E+P+D: P consumes, D decodes]"

// eppdCopies returns an E+P+D copy of every non-destructive E+PD case of
// cs whose check holds for any consumer: the same rule and checks, with P
// as the consumer and each of its KV sessions decoded on D, so the
// consumer rules are checked on P too (CONTRACT section 1: P "consumes a
// published output"). eppdExcluded lists the E+PD cases left out, with why.
func eppdCopies(cs []Case) []Case {
	var out []Case
	for _, c := range cs {
		if c.Destructive || c.Needs.Topology != target.TopologyEPD || copyExcluded(c, eppdExcluded) != "" {
			continue
		}
		c.Name += eppdSuffix
		c.Needs = c.Needs.with(func(n *Needs) { n.Topology = target.TopologyEPPD })
		c.Labels = slices.Clone(c.Labels)
		c.ViaPrefill = true
		out = append(out, c)
	}
	return out
}

// eppdExcluded are the E+PD cases without an E+P+D copy, with why.
var eppdExcluded = map[string]string{
	"SE-3 a producer asked to write to an untrusted consumer agent answers FAILED_PRECONDITION with the before-write trailer": "a producer's check: no consumer takes part",
}
