package props

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"pgregory.net/rapid"
)

// The Faults-level action (CONTRACT Q-1..Q-5, C-4): it needs a target
// whose harness runs the fault proxy between consumer and producer
// (Profile.FaultProxy, target.FaultInjector) and can replace the instances
// a quarantine poisons (target.Restarter: quarantine is sticky until
// restart, Q-4), on a backend whose consumer calls TransferEncoderCache.
func init() { actionSets = append(actionSets, faultActions) }

// heldTransfer is how long the Q-5 scenario has the fault proxy
// hold a transfer's reply: long enough to act while the transfer is stuck,
// well short of a consumer's transfer deadline (the reference engine's is
// 3 s under the fault proxy), so the outcome stays certain.
const heldTransfer = 400 * time.Millisecond

// cancelHeld is how long the C-4 scenario has the fault proxy hold a
// transfer's reply; it checks the receive stays in flight over the first
// three quarters of it (the reply cannot arrive earlier, whatever the
// load).
const cancelHeld = 200 * time.Millisecond

// heldMargin: what must not wait for a held transfer must be answered
// at least this long before the proxy releases the reply.
const heldMargin = 100 * time.Millisecond

// Faults after which a consumer cannot know a transfer's outcome.
// Those answered at once (UNAVAILABLE without forwarding; a cut connection
// after the producer completed) are drawn most; those that wait for the
// consumer's transfer deadline (a lost request or reply, a reply held past
// it) cost that whole deadline (3 s on the reference engine under the
// fault proxy), so together they are drawn one time in eighteen: one in
// a replay costs rapid's shrinking (5 s in the kill table) most of its
// time. rapid shrinks towards UNAVAILABLE.
var (
	fastLostFaults     = []target.TransferFault{target.FaultUnavailable, target.FaultCutConnection}
	deadlineLostFaults = []target.TransferFault{target.FaultDropReply, target.FaultDropRequest, target.FaultDelay}
)

// drawLostTransferFault draws a fault for the "lost" scenario.
func drawLostTransferFault(t *rapid.T) target.TransferFault {
	if i := rapid.IntRange(0, 17).Draw(t, "fault"); i < 17 {
		return fastLostFaults[i%2]
	}
	return rapid.SampledFrom(deadlineLostFaults).Draw(t, "deadline fault")
}

// faultMachine is a machine whose target injects transfer faults and
// restarts instances.
type faultMachine struct {
	*machine
	faults  target.FaultInjector
	restart target.Restarter
	ran     bool // a fault scenario ran in this check
}

// faultActions returns the Faults-level action, faultedHandoff, with the
// scenarios mc's target can run: nothing without the fault proxy, a
// restarter or a transfer backend; cancelled-while-held (C-4) needs
// observables, failed-after-claim test hooks. It first restarts any
// role an earlier, failed check left not READY (heal).
func faultActions(mc *machine) map[string]func(*rapid.T) {
	fi, ok1 := mc.tg.(target.FaultInjector)
	rs, ok2 := mc.tg.(target.Restarter)
	transfer := slices.ContainsFunc(mc.profile.Backends, func(b string) bool { return b != "shared_dir" })
	if !ok1 || !ok2 || !mc.profile.FaultProxy || !transfer {
		return nil
	}
	f := &faultMachine{machine: mc, faults: fi, restart: rs}
	if err := f.heal(); err != nil {
		panic("props: harness: " + err.Error()) // rapid fails the check with it
	}
	scenarios := map[string]func(*rapid.T){
		"lost":                     func(t *rapid.T) { f.faultedConsume(t, drawLostTransferFault(t)) },
		"rejected-without-trailer": func(t *rapid.T) { f.faultedConsume(t, target.FaultInvalidArgument) },
		"held":                     f.stuckConsume,
	}
	if mc.profile.Observables {
		scenarios["cancelled-while-held"] = f.cancelStuckConsume
	}
	if mc.profile.TestHooks {
		scenarios["failed-after-claim"] = f.failAfterRemoval
	}
	names := make([]string, 0, len(scenarios))
	for _, n := range []string{"lost", "rejected-without-trailer", "failed-after-claim", "held", "cancelled-while-held"} {
		if scenarios[n] != nil {
			names = append(names, n)
		}
	}
	// One action for every scenario, run at most once a check: each costs
	// a restart or a held transfer (tens to hundreds of milliseconds on the
	// reference engine, against milliseconds for a core action), and
	// rapid's shrinking replays a failing check hundreds of times within
	// its budget (5 s in the kill table), so a replay must stay cheap.
	return map[string]func(*rapid.T){
		"faultedHandoff": func(t *rapid.T) {
			if f.ran {
				t.SkipNow()
			}
			f.ran = true
			scenarios[rapid.SampledFrom(names).Draw(t, "scenario")](t)
		},
	}
}

// faultedConsume consumes a live reference while the fault proxy puts
// fault on its transfer (a lost request or reply, a cut connection,
// UNAVAILABLE, a reply held past the consumer's deadline, or an
// INVALID_ARGUMENT without the before-write trailer): the consume fails
// without a token, the consumer quarantines its receive buffers (Q-1; Q-2:
// only INVALID_ARGUMENT with the trailer is a definite rejection), reports
// NOT_READY and refuses new handoffs with UNAVAILABLE. What the
// producer saw of the call decides the model's state of the reference:
// live if the request never reached it, consumed if it answered OK, else
// unknown. The consumer is restarted afterwards.
func (f *faultMachine) faultedConsume(t *rapid.T, fault target.TransferFault) {
	if f.m.down["consumer"] || f.m.down["producer"] {
		t.SkipNow()
	}
	r, how := f.liveRef(t)
	f.step(t, "consume %s%s with its transfer faulted: %s", f.stepLabel(r), how, fault)
	ok := false
	defer func() { f.after(t, ok, target.RoleConsumer) }()
	f.inject(t, f.cfg.CallTimeout, fault) // a delay past any consumer's transfer deadline
	ctx, cancel := f.ctx()
	defer cancel()
	entered := f.quarantinesEntered(t)
	res := f.generate(t, ctx, f.cons, f.consumeRequest(r.ref))
	call := f.consumeCall(r, "transfer "+string(fault))
	if res.Code() == codes.OK || len(res.TokenIDs()) > 0 {
		fatal(t, describe(res), "%s = %s; want a failure and no token: the consumer cannot know the transfer's outcome (Q-1, Q-2)", call, brief(res))
	}
	f.decideFromProxy(t, r)
	why := "(Q-1: an uncertain outcome quarantines the receive buffers)"
	if fault == target.FaultInvalidArgument {
		why = "(Q-2: an INVALID_ARGUMENT without the before-write trailer is no definite rejection; the buffers are quarantined)"
	}
	still := f.expectConsumerQuarantined(t, entered, "after "+call+" "+why)
	// a quarantined consumer refuses new handoffs before any transfer.
	if live := f.m.in(stateLive); still && len(live) > 0 {
		other := f.m.refs[live[0]]
		res := f.generate(t, ctx, f.cons, f.consumeRequest(other.ref))
		if res.Code() != codes.Unavailable || len(res.TokenIDs()) > 0 {
			fatal(t, describe(res), "%s on the quarantined consumer = %s; want UNAVAILABLE before any token (Q-4)", f.consumeCall(other, "after quarantine"), brief(res))
		}
	}
	ok = true
}

// decideFromProxy sets r's model state from what the fault proxy saw of
// the one transfer call since the plan was set: the producer never
// answered it (not forwarded, or unreachable): still live; it answered OK:
// consumed; anything else: unknown.
func (f *faultMachine) decideFromProxy(t *rapid.T, r *refRecord) target.TransferCall {
	t.Helper()
	now, stop := context.WithCancel(context.Background())
	stop()
	if f.faults.TransferArrived(now, target.MethodTransferEncoderCache, 1) != nil {
		t.Fatalf("the consume of %s ended without a TransferEncoderCache call reaching the fault proxy; want the consumer to ask the producer", f.label(r))
	}
	// The call arrived; it is done once the consumer's own deadline (a
	// dropped request or reply) or the producer's answer ended it.
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.SettleTimeout)
	defer cancel()
	calls, err := f.faults.TransferCalls(ctx, target.MethodTransferEncoderCache, 1)
	if err != nil || len(calls) == 0 {
		fatal(t, fmt.Sprint(err), "harness: the fault proxy saw no finished TransferEncoderCache call for %s", f.label(r))
	}
	c := calls[0]
	switch {
	case !c.UpstreamReached:
		r.state = stateLive
	case c.UpstreamCode == "OK":
		r.state, r.unobserved = stateConsumed, false
	default:
		r.state = stateUnknown
	}
	return c
}

// stuckConsume consumes a live reference while the fault proxy holds its
// transfer's reply (short of the consumer's deadline): before the reply is
// released the consumer must answer Health and serve a text-only request
// no lock is held across a transfer), and the consume then gets its
// tokens.
func (f *faultMachine) stuckConsume(t *rapid.T) {
	if f.m.down["consumer"] || f.m.down["producer"] {
		t.SkipNow()
	}
	r, how := f.liveRef(t)
	f.step(t, "consume %s%s with its transfer reply held %v; Health and a text-only request meanwhile", f.stepLabel(r), how, heldTransfer)
	ok := false
	defer func() { f.after(t, ok) }()
	f.inject(t, heldTransfer, target.FaultDelay)
	ctx, cancel := f.ctx()
	defer cancel()
	done := f.goConsume(ctx, r)
	defer func() { <-done }() // never leave the consume running into the next action
	arrived := f.arrived(t, ctx, cancel, done)
	released := arrived.Add(heldTransfer - heldMargin)
	hctx, hcancel := context.WithDeadline(ctx, released)
	_, err := f.cons.Health(hctx)
	hcancel()
	if err != nil {
		fatal(t, fmt.Sprintf("%s, %v after the transfer arrived", statusString(err), time.Since(arrived).Round(time.Millisecond)),
			"Health(consumer) while a transfer's reply is held = %s; want an answer before the reply is released (Q-5: no lock held across a transfer)", codeName(status.Code(err)))
	}
	tctx, tcancel := context.WithDeadline(ctx, released)
	text, err := f.cons.Generate(tctx, f.textRequest())
	tcancel()
	if err != nil || text.Code() != codes.OK || len(text.TokenIDs()) == 0 {
		got, detail := codeName(status.Code(err)), statusString(err)
		if err == nil {
			got, detail = brief(text), describe(text)
		}
		fatal(t, fmt.Sprintf("%s, %v after the transfer arrived", detail, time.Since(arrived).Round(time.Millisecond)),
			"Generate(text-only) on the consumer while a transfer's reply is held = %s; want tokens before the reply is released (Q-5, N-2)", got)
	}
	res := <-done
	done <- res // for the deferred wait
	call := f.consumeCall(r, "transfer reply held")
	if res == nil {
		t.Fatalf("%s: harness error (no stream)", call)
	}
	f.expectTokens(t, r, call, res)
	ok = true
}

// cancelStuckConsume cancels a consume while the fault proxy holds its
// transfer's reply: the client gets CANCELED, yet the consumer keeps the
// receive in flight until the outcome is known (C-4), then, the transfer
// having succeeded, releases its buffers: nothing in flight, nothing
// quarantined.
func (f *faultMachine) cancelStuckConsume(t *rapid.T) {
	if f.m.down["consumer"] || f.m.down["producer"] {
		t.SkipNow()
	}
	r, how := f.liveRef(t)
	f.step(t, "cancel the consume of %s%s while its transfer reply is held %v", f.stepLabel(r), how, cancelHeld)
	ok := false
	defer func() { f.after(t, ok) }()
	f.inject(t, cancelHeld, target.FaultDelay)
	ctx, cancel := f.ctx()
	defer cancel()
	done := f.goConsume(ctx, r)
	defer func() { <-done }()
	arrived := f.arrived(t, ctx, cancel, done)
	cancel()
	res := <-done
	done <- res
	call := f.consumeCall(r, "cancelled while its transfer reply is held")
	if res != nil && (res.Code() != codes.Canceled || len(res.TokenIDs()) > 0) {
		fatal(t, describe(res), "%s = %s; want CANCELED before any token", call, brief(res))
	}
	// Until the proxy releases the reply the outcome is unknown: the
	// receive must stay in flight (C-4). Polled over the first three
	// quarters of the hold, before the release.
	for time.Since(arrived) < cancelHeld*3/4 {
		c, _ := f.counters(t, "consumer", f.cons)
		if time.Since(arrived) >= cancelHeld {
			break // answered once the reply may have been released: no evidence either way (a slow GetLoad is stuckConsume's Q-5 business)
		}
		if n := c[obsInflight]; n < 1 {
			fatal(t, fmt.Sprintf("%v after the transfer arrived", time.Since(arrived).Round(time.Millisecond)),
				"after %s: GetLoad(consumer) %s = %v before the transfer's outcome was known; want >= 1 (C-4: the buffers are kept until the outcome is known)", call, obsInflight, n)
		}
		waitPoll()
	}
	if rec := f.decideFromProxy(t, r); rec.UpstreamCode != "OK" {
		t.Fatalf("after %s: the producer answered the held transfer %q; want OK (a live reference)", call, rec.UpstreamCode)
	}
	// The outcome (success) is known now: the consumer releases the receive.
	deadline := time.Now().Add(f.cfg.SettleTimeout)
	for {
		c, _ := f.counters(t, "consumer", f.cons)
		if c[obsQuarantineBuffers] != 0 {
			t.Fatalf("after %s, whose transfer then succeeded: GetLoad(consumer) %s = %v; want 0 (C-4: a known success releases, never quarantines)", call, obsQuarantineBuffers, c[obsQuarantineBuffers])
		}
		if c[obsInflight] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, whose transfer then succeeded: GetLoad(consumer) %s = %v after %v; want 0 (C-4: released once the outcome is known, nothing leaks)", call, obsInflight, c[obsInflight], f.cfg.SettleTimeout)
		}
		waitPoll()
	}
	ok = true
}

// failAfterRemoval consumes a live reference with the baton.transfer_fail
// test hook, so the producer's WRITE fails after the entry left its table:
// the producer's answer is never INVALID_ARGUMENT (nor OK), it quarantines
// the source instead of freeing it and reports NOT_READY; the
// consumer, answered an error without the before-write trailer,
// quarantines its buffers. Both are restarted afterwards, and
// the references of the old producer leave the model.
func (f *faultMachine) failAfterRemoval(t *rapid.T) {
	if f.m.down["consumer"] || f.m.down["producer"] {
		t.SkipNow()
	}
	r, how := f.liveRef(t)
	f.step(t, "consume %s%s with the producer's WRITE failing after the claim (baton.transfer_fail)", f.stepLabel(r), how)
	ok := false
	defer func() { f.after(t, ok, target.RoleConsumer, target.RoleProducer) }()
	f.inject(t, 0) // a fresh record of the calls
	req := f.consumeRequest(r.ref)
	var err error
	if req.Extra, err = structpb.NewStruct(map[string]any{"baton.transfer_fail": true}); err != nil {
		t.Fatalf("extra: %v", err)
	}
	ctx, cancel := f.ctx()
	defer cancel()
	entered := f.quarantinesEntered(t)
	res := f.generate(t, ctx, f.cons, req)
	call := f.consumeCall(r, "WRITE failing after the claim")
	if res.Code() == codes.OK || len(res.TokenIDs()) > 0 {
		fatal(t, describe(res), "%s = %s; want a failure and no token (Q-3)", call, brief(res))
	}
	rec := f.decideFromProxy(t, r)
	if rec.UpstreamCode == "INVALID_ARGUMENT" || rec.UpstreamCode == "OK" {
		t.Fatalf("%s: the producer answered TransferEncoderCache %s after the entry left its table; want an error that is not INVALID_ARGUMENT (Q-3: the WRITE may have landed)", call, rec.UpstreamCode)
	}
	f.expectQuarantined(t, "producer", f.prod, "after "+call+" (Q-3: a source whose WRITE failed past the claim is quarantined, never freed)")
	f.expectConsumerQuarantined(t, entered, "after "+call+" (Q-1, Q-2: an error without the before-write trailer is uncertain)")
	ok = true
}

// --- helpers --------------------------------------------------------------------

// fatal logs detail (ids, messages, timings: what differs from one run of
// the same draws to the next) and fails the check with msg, which must
// not: rapid shrinks a failure only while a replay fails with the very
// same message.
func fatal(t *rapid.T, detail, format string, args ...any) {
	t.Helper()
	if detail != "" {
		t.Logf("detail: %s", detail)
	}
	t.Fatalf(format, args...)
}

// label names r for failure messages by its image alone: the same in
// every replay of the same draws, whereas a reference's bytes are random
// and its place in the model moves with the outcome of a race (a publish
// cancelled in flight may or may not add one). stepLabel adds the place,
// for the step log.
func (f *faultMachine) label(r *refRecord) string {
	return "a reference to " + f.cfg.Images[r.image].Name
}

func (f *faultMachine) stepLabel(r *refRecord) string {
	for i, x := range f.m.refs {
		if x == r {
			return fmt.Sprintf("reference #%d (%s, %s)", i+1, f.cfg.Images[r.image].Name, refLabel(r.ref))
		}
	}
	return f.label(r)
}

// consumeCall names a consume of r for failure messages.
func (f *faultMachine) consumeCall(r *refRecord, note string) string {
	return fmt.Sprintf("Consume(%s, %s)", f.label(r), note)
}

// liveRef returns the live reference a fault action hands off: one the
// model holds, or (always when it holds none; rapid shrinks towards it) a
// fresh publish of a drawn image, so that a counterexample needs no
// publish action before the fault. The string says which, for the step.
func (f *faultMachine) liveRef(t *rapid.T) (*refRecord, string) {
	t.Helper()
	live := f.m.in(stateLive)
	if len(live) > 0 && (len(live) >= f.cfg.MaxLive || rapid.Bool().Draw(t, "reuse a live reference")) {
		return f.m.refs[rapid.SampledFrom(live).Draw(t, "ref")], ""
	}
	img := rapid.IntRange(0, len(f.cfg.Images)-1).Draw(t, "image")
	ctx, cancel := f.ctx()
	defer cancel()
	call := fmt.Sprintf("Publish(image=%s)", f.cfg.Images[img].Name)
	f.expectPublished(t, call, f.generate(t, ctx, f.prod, f.publishRequest(img)), img)
	return f.m.refs[len(f.m.refs)-1], " (just published)"
}

// inject sets the fault proxy's plan for the next transfer calls (none
// after them) and starts a fresh record of the calls.
func (f *faultMachine) inject(t *rapid.T, delay time.Duration, faults ...target.TransferFault) {
	t.Helper()
	if err := f.faults.SetTransferFaults(target.MethodTransferEncoderCache, delay, faults...); err != nil {
		t.Errorf("harness: set transfer faults %v: %v", faults, err)
	}
}

// goConsume consumes r in the background; the channel gets the result
// (nil on a harness error) and has room to put it back.
func (f *faultMachine) goConsume(ctx context.Context, r *refRecord) chan *target.GenerateResult {
	done := make(chan *target.GenerateResult, 1)
	req := f.consumeRequest(r.ref)
	cons := f.cons
	go func() {
		res, err := cons.Generate(ctx, req)
		if err != nil || res == nil || res.Status == nil {
			res = nil
		}
		done <- res
	}()
	return done
}

// arrived waits until the consumer's transfer call reached the fault proxy
// and returns when. If the consume ends first (it was refused before any
// transfer), or the call never arrives, it cancels the consume and fails
// the check; done gets the consume's result back.
func (f *faultMachine) arrived(t *rapid.T, ctx context.Context, cancel context.CancelFunc, done chan *target.GenerateResult) time.Time {
	t.Helper()
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	arrived := make(chan error, 1)
	go func() { arrived <- f.faults.TransferArrived(actx, target.MethodTransferEncoderCache, 1) }()
	select {
	case err := <-arrived:
		if err != nil {
			cancel()
			fatal(t, fmt.Sprint(err), "the consumer's TransferEncoderCache call never reached the fault proxy")
		}
		return time.Now()
	case res := <-done:
		done <- res
		acancel()
		if err := <-arrived; err == nil {
			return time.Now() // it arrived, and the consume ended at once after (the check that follows judges it)
		}
		cancel()
		got, detail := "no stream", "harness error"
		if res != nil {
			got, detail = brief(res), describe(res)
		}
		fatal(t, detail, "the consume ended (%s) before its TransferEncoderCache call reached the fault proxy; want it to wait for its transfer", got)
	}
	panic("unreachable")
}

// expectTokens checks that a consume of live r got tokens (SU-1), the
// same as every earlier answer for r's image, and marks r consumed.
func (f *faultMachine) expectTokens(t *rapid.T, r *refRecord, call string, res *target.GenerateResult) {
	t.Helper()
	ids := res.TokenIDs()
	if res.Code() != codes.OK || len(ids) == 0 {
		fatal(t, describe(res), "%s = %s; want tokens (a live reference, SU-1; the held reply arrives within the consumer's deadline)", call, brief(res))
	}
	r.state, r.unobserved = stateConsumed, false
	if want, ok := f.m.answers[r.image]; ok && !equalIDs(ids, want) {
		t.Fatalf("%s = tokens %v; want %v, the answer an earlier reference to %s got (same image, same prompt)", call, ids, want, f.cfg.Images[r.image].Name)
	}
	f.m.answers[r.image] = ids
}

// quarantinesEntered is the consumer's count of quarantines ever entered
// (obsQuarantineEntered), -1 where it offers none.
func (f *faultMachine) quarantinesEntered(t *rapid.T) float64 {
	t.Helper()
	if c, ok := f.counters(t, "consumer", f.cons); ok {
		if n, offered := c[obsQuarantineEntered]; offered {
			return n
		}
	}
	return -1
}

// expectConsumerQuarantined checks that the consumer quarantined after an
// uncertain transfer: still quarantined (expectQuarantined), or, where it
// counts the quarantines it entered, entered one since that count was
// before and Q-6 has ended it already, nothing quarantined (nothing was
// written, and a consumer that closes the connections that carried the
// request itself ends it at once). It reports whether the consumer is
// still quarantined.
func (f *faultMachine) expectConsumerQuarantined(t *rapid.T, before float64, why string) bool {
	t.Helper()
	ctx, cancel := f.ctx()
	defer cancel()
	if resp, err := f.cons.Health(ctx); err == nil && resp.GetState() == pb.HealthState_HEALTH_STATE_READY {
		if before < 0 {
			// Without the count an ended quarantine and none at all look
			// alike: this step cannot judge Q-1 or Q-4 (the suite's cases
			// end `not verifiable` in the same place).
			f.step(t, "the consumer is READY %s: Q-6 may have ended its quarantine already, and it offers no %s to tell; Q-1 and Q-4 not judged here", why, obsQuarantineEntered)
			return false
		}
		if c, ok := f.counters(t, "consumer", f.cons); ok && c[obsQuarantineEntered] > before && c[obsQuarantineBuffers] == 0 {
			f.step(t, "the consumer's quarantine %s was entered and already ended (Q-6)", why)
			return false
		}
	}
	f.expectQuarantined(t, "consumer", f.cons, why)
	return true
}

// expectQuarantined checks Q-4 on e: Health NOT_READY with the
// encoder_cache check NOT_READY, and (observables) at least one
// quarantined buffer.
func (f *faultMachine) expectQuarantined(t *rapid.T, role string, e target.Engine, why string) {
	t.Helper()
	ctx, cancel := f.ctx()
	defer cancel()
	resp, err := e.Health(ctx)
	cacheCheck := false
	var checks []string
	for _, c := range resp.GetChecks() {
		checks = append(checks, c.GetName()+"="+c.GetState().String())
		if c.GetName() == "encoder_cache" && c.GetState() == pb.HealthState_HEALTH_STATE_NOT_READY {
			cacheCheck = true
		}
	}
	if err != nil || resp.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY || !cacheCheck {
		fatal(t, statusString(err), "Health(%s) %s = %s [%s]; want NOT_READY with check encoder_cache NOT_READY (Q-4)", role, why, resp.GetState(), strings.Join(checks, "; "))
	}
	if c, ok := f.counters(t, role, e); ok && c[obsQuarantineBuffers] < 1 {
		t.Fatalf("GetLoad(%s) %s = %v %s; want >= 1", role, obsQuarantineBuffers, c[obsQuarantineBuffers], why)
	}
}

// after ends a fault action: it clears the fault plan and restarts the
// roles the action poisoned (quarantine is sticky until restart, Q-4).
// After a failure it restarts instead whichever role is not READY, so the
// next check (rapid's shrinking replays it on the same target) starts
// from healthy instances.
func (f *faultMachine) after(t *rapid.T, ok bool, poisoned ...target.Role) {
	f.inject(t, 0)
	var err error
	if ok {
		err = f.restartRoles(poisoned...)
	} else {
		err = f.heal()
	}
	if err != nil {
		t.Errorf("harness: %v", err)
	}
}

// heal restarts every role that is not READY. A check that failed may
// have left one quarantined, and a quarantined role stays so until
// restart; faultActions runs it as every check begins, so that no
// check (a replay, while rapid shrinks) inherits an earlier one's poison.
func (f *faultMachine) heal() error {
	var sick []target.Role
	for _, role := range []target.Role{target.RoleConsumer, target.RoleProducer} {
		if f.m.down[string(role)] {
			continue
		}
		ctx, cancel := f.ctx()
		resp, err := f.engine(string(role)).Health(ctx)
		cancel()
		if err != nil || resp.GetState() != pb.HealthState_HEALTH_STATE_READY {
			sick = append(sick, role)
		}
	}
	return f.restartRoles(sick...)
}

// restartRoles replaces the instances of roles (quarantine is sticky until
// restart, Q-4) and brings the machine up to date: a new consumer has
// nothing in flight; a new producer has an empty table, so the old one's
// references leave the model.
func (f *faultMachine) restartRoles(roles ...target.Role) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, role := range roles {
		if err := f.restart.Restart(ctx, role); err != nil {
			return fmt.Errorf("restart %s: %w", role, err)
		}
		e, ok := f.tg.Engine(role)
		if !ok {
			return fmt.Errorf("no %s after its restart", role)
		}
		switch role {
		case target.RoleConsumer:
			f.cons = e
			f.m.uncertainConsumes = 0
		case target.RoleProducer:
			f.prod = e
			f.m.refs, f.m.orphans = nil, 0
			f.entries0, f.inherited = 0, 0
			if f.profile.Observables {
				info, err := e.GetLoad(ctx)
				if err != nil {
					return fmt.Errorf("GetLoad(producer) after its restart: %w", err)
				}
				f.entries0 = int(info.GetAttributes().GetFields()[obsEntries].GetNumberValue())
			}
		}
	}
	return nil
}

// textRequest is a text-only request for the consumer (N-2).
func (f *faultMachine) textRequest() *pb.GenerateRequest {
	prompt := "Hello"
	for _, p := range fixtures.Prompts() {
		if p.Images == 0 {
			prompt = p.Text
			break
		}
	}
	req := f.consumeRequest(nil)
	req.RequestId = newRequestID("props-text")
	req.Input = &pb.GenerateRequest_Prompt{Prompt: prompt}
	req.Encoder = nil
	return req
}
