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
	"google.golang.org/protobuf/types/known/structpb"
	"pgregory.net/rapid"
)

// The Faults-level actions (CONTRACT Q-1..Q-5, C-4): they need a target
// whose harness runs the fault proxy between consumer and producer
// (Profile.FaultProxy, target.FaultInjector) and can replace the instances
// a quarantine poisons (target.Restarter: quarantine is sticky until
// restart, Q-4), on a backend whose consumer calls TransferEncoderCache.
func init() { actionSets = append(actionSets, faultActions) }

// heldTransfer is how long the Q-5 and C-4 actions have the fault proxy
// hold a transfer's reply: long enough to act while the transfer is stuck,
// well short of a consumer's transfer deadline (the reference engine's is
// 3 s under the fault proxy), so the outcome stays certain.
const heldTransfer = 1200 * time.Millisecond

// heldMargin: what must not wait for a held transfer must be answered
// at least this long before the proxy releases the reply.
const heldMargin = 150 * time.Millisecond

// uncertainFaults are the faults that leave a consumer unable to know a
// transfer's outcome (Q-1; a plain INVALID_ARGUMENT without the
// before-write trailer, Q-2), first those that answer at once (rapid
// shrinks towards the first).
var uncertainFaults = []target.TransferFault{
	target.FaultInvalidArgument, target.FaultUnavailable, target.FaultCutConnection,
	target.FaultDropReply, target.FaultDropRequest, target.FaultDelay,
}

// faultMachine is a machine whose target injects transfer faults and
// restarts instances.
type faultMachine struct {
	*machine
	faults  target.FaultInjector
	restart target.Restarter
}

// faultActions returns the Faults-level actions mc's target can run: none
// without the fault proxy, a restarter or a transfer backend; the C-4
// action needs observables, the Q-3 action test hooks.
func faultActions(mc *machine) map[string]func(*rapid.T) {
	fi, ok1 := mc.tg.(target.FaultInjector)
	rs, ok2 := mc.tg.(target.Restarter)
	transfer := slices.ContainsFunc(mc.profile.Backends, func(b string) bool { return b != "shared_dir" })
	if !ok1 || !ok2 || !mc.profile.FaultProxy || !transfer {
		return nil
	}
	f := &faultMachine{machine: mc, faults: fi, restart: rs}
	acts := map[string]func(*rapid.T){
		"faultedConsume": f.faultedConsume,
		"stuckConsume":   f.stuckConsume,
	}
	if mc.profile.Observables {
		acts["cancelStuckConsume"] = f.cancelStuckConsume
	}
	if mc.profile.TestHooks {
		acts["failAfterRemoval"] = f.failAfterRemoval
	}
	return acts
}

// faultedConsume consumes a live reference while the fault proxy puts a
// drawn fault on its transfer: the consume fails without a token, the
// consumer quarantines its receive buffers (Q-1; Q-2 for an
// INVALID_ARGUMENT without the before-write trailer), reports NOT_READY
// and refuses new handoffs with UNAVAILABLE. What the producer saw
// of the call decides the model's state of the reference: live if the
// request never reached it, consumed if it answered OK, else unknown. The
// consumer is restarted afterwards.
func (f *faultMachine) faultedConsume(t *rapid.T) {
	if f.m.down["consumer"] || f.m.down["producer"] {
		t.SkipNow()
	}
	r := f.pick(t, "ref", stateLive)
	fault := rapid.SampledFrom(uncertainFaults).Draw(t, "fault")
	f.step(t, "consume %s with its transfer faulted: %s", refLabel(r.ref), fault)
	defer f.restartRoles(t, target.RoleConsumer)
	defer f.inject(t, 0)
	f.inject(t, f.cfg.CallTimeout, fault) // a delay past any consumer's transfer deadline
	ctx, cancel := f.ctx()
	defer cancel()
	res := f.generate(t, ctx, f.cons, f.consumeRequest(r.ref))
	call := consumeCall(r.ref, "transfer "+string(fault))
	if res.Code() == codes.OK || len(res.TokenIDs()) > 0 {
		t.Fatalf("%s = %s; want a failure and no token: the consumer cannot know the transfer's outcome (Q-1, Q-2)", call, describe(res))
	}
	f.decideFromProxy(t, r)
	f.expectQuarantined(t, "consumer", f.cons, fmt.Sprintf("after %s (Q-1, Q-2: an uncertain outcome quarantines, a plain INVALID_ARGUMENT without the before-write trailer included)", call))
	// a quarantined consumer refuses new handoffs before any transfer.
	if live := f.m.in(stateLive); len(live) > 0 {
		other := f.m.refs[live[0]]
		res := f.generate(t, ctx, f.cons, f.consumeRequest(other.ref))
		if res.Code() != codes.Unavailable || len(res.TokenIDs()) > 0 {
			t.Fatalf("%s on the quarantined consumer = %s; want UNAVAILABLE before any token (Q-4)", consumeCall(other.ref, "after quarantine"), describe(res))
		}
	}
}

// decideFromProxy sets r's model state from what the fault proxy saw of
// the one transfer call since the plan was set: the producer never
// answered it (not forwarded, or unreachable): still live; it answered OK:
// consumed; anything else: unknown.
func (f *faultMachine) decideFromProxy(t *rapid.T, r *refRecord) target.TransferCall {
	t.Helper()
	ctx, cancel := f.ctx()
	defer cancel()
	calls, err := f.faults.TransferCalls(ctx, target.MethodTransferEncoderCache, 1)
	if err != nil || len(calls) == 0 {
		t.Fatalf("harness: the fault proxy saw no finished TransferEncoderCache call for %s: %v", refLabel(r.ref), err)
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
	r := f.pick(t, "ref", stateLive)
	f.step(t, "consume %s with its transfer reply held %v; Health and a text-only request meanwhile", refLabel(r.ref), heldTransfer)
	defer f.inject(t, 0)
	f.inject(t, heldTransfer, target.FaultDelay)
	ctx, cancel := f.ctx()
	defer cancel()
	done := f.goConsume(ctx, r)
	defer func() { <-done }() // never leave the consume running into the next action
	arrived := f.arrived(t, ctx, cancel)
	released := arrived.Add(heldTransfer - heldMargin)
	hctx, hcancel := context.WithDeadline(ctx, released)
	_, err := f.cons.Health(hctx)
	hcancel()
	if err != nil {
		t.Fatalf("Health(consumer) while a transfer's reply is held = %s, %v after the transfer arrived; want an answer before the reply is released (Q-5: no lock held across a transfer)", statusString(err), time.Since(arrived).Round(time.Millisecond))
	}
	tctx, tcancel := context.WithDeadline(ctx, released)
	text, err := f.cons.Generate(tctx, f.textRequest())
	tcancel()
	if err != nil || text.Code() != codes.OK || len(text.TokenIDs()) == 0 {
		got := statusString(err)
		if err == nil {
			got = describe(text)
		}
		t.Fatalf("Generate(text-only) on the consumer while a transfer's reply is held = %s, %v after the transfer arrived; want tokens before the reply is released (Q-5, N-2)", got, time.Since(arrived).Round(time.Millisecond))
	}
	res := <-done
	done <- res // for the deferred wait
	call := consumeCall(r.ref, "transfer reply held")
	if res == nil {
		t.Fatalf("%s: harness error (no stream)", call)
	}
	f.expectTokens(t, r, call, res)
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
	r := f.pick(t, "ref", stateLive)
	f.step(t, "cancel the consume of %s while its transfer reply is held %v", refLabel(r.ref), heldTransfer)
	defer f.inject(t, 0)
	f.inject(t, heldTransfer, target.FaultDelay)
	ctx, cancel := f.ctx()
	defer cancel()
	done := f.goConsume(ctx, r)
	defer func() { <-done }()
	arrived := f.arrived(t, ctx, cancel)
	cancel()
	res := <-done
	done <- res
	call := consumeCall(r.ref, "cancelled while its transfer reply is held")
	if res != nil && (res.Code() != codes.Canceled || len(res.TokenIDs()) > 0) {
		t.Fatalf("%s = %s; want CANCELED before any token", call, describe(res))
	}
	// Until the proxy releases the reply the outcome is unknown: the
	// receive must stay in flight (C-4). Polled over the first half of the
	// hold, well before the release.
	for time.Since(arrived) < heldTransfer/2 {
		c, _ := f.counters(t, "consumer", f.cons)
		if n := c[obsInflight]; n < 1 {
			t.Fatalf("after %s: GetLoad(consumer) %s = %v %v after the transfer arrived, before its outcome was known; want >= 1 (C-4: the buffers are kept until the outcome is known)",
				call, obsInflight, n, time.Since(arrived).Round(time.Millisecond))
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
	r := f.pick(t, "ref", stateLive)
	f.step(t, "consume %s with the producer's WRITE failing after the claim (baton.transfer_fail)", refLabel(r.ref))
	defer f.restartRoles(t, target.RoleConsumer, target.RoleProducer)
	f.inject(t, 0) // a fresh record of the calls
	req := f.consumeRequest(r.ref)
	var err error
	if req.Extra, err = structpb.NewStruct(map[string]any{"baton.transfer_fail": true}); err != nil {
		t.Fatalf("extra: %v", err)
	}
	ctx, cancel := f.ctx()
	defer cancel()
	res := f.generate(t, ctx, f.cons, req)
	call := consumeCall(r.ref, "WRITE failing after the claim")
	if res.Code() == codes.OK || len(res.TokenIDs()) > 0 {
		t.Fatalf("%s = %s; want a failure and no token (Q-3)", call, describe(res))
	}
	rec := f.decideFromProxy(t, r)
	if rec.UpstreamCode == "INVALID_ARGUMENT" || rec.UpstreamCode == "OK" {
		t.Fatalf("%s: the producer answered TransferEncoderCache %s after the entry left its table; want an error that is not INVALID_ARGUMENT (Q-3: the WRITE may have landed)", call, rec.UpstreamCode)
	}
	f.expectQuarantined(t, "producer", f.prod, "after "+call+" (Q-3: a source whose WRITE failed past the claim is quarantined, never freed)")
	f.expectQuarantined(t, "consumer", f.cons, "after "+call+" (Q-1, Q-2: an error without the before-write trailer is uncertain)")
}

// --- helpers --------------------------------------------------------------------

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
// and returns when; on failure it cancels the consume and fails the check.
func (f *faultMachine) arrived(t *rapid.T, ctx context.Context, cancel context.CancelFunc) time.Time {
	t.Helper()
	if err := f.faults.TransferArrived(ctx, target.MethodTransferEncoderCache, 1); err != nil {
		cancel()
		t.Fatalf("the consumer's TransferEncoderCache call never reached the fault proxy: %v", err)
	}
	return time.Now()
}

// expectTokens checks that a consume of live r got tokens (SU-1), the
// same as every earlier answer for r's image, and marks r consumed.
func (f *faultMachine) expectTokens(t *rapid.T, r *refRecord, call string, res *target.GenerateResult) {
	t.Helper()
	ids := res.TokenIDs()
	if res.Code() != codes.OK || len(ids) == 0 {
		t.Fatalf("%s = %s; want tokens (a live reference, SU-1; the held reply arrives within the consumer's deadline)", call, describe(res))
	}
	r.state, r.unobserved = stateConsumed, false
	if want, ok := f.m.answers[r.image]; ok && !equalIDs(ids, want) {
		t.Fatalf("%s = tokens %v; want %v, the answer an earlier reference to %s got (same image, same prompt)", call, ids, want, f.cfg.Images[r.image].Name)
	}
	f.m.answers[r.image] = ids
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
		t.Fatalf("Health(%s) %s = %s %s [%s]; want NOT_READY with check encoder_cache NOT_READY (Q-4)", role, why, resp.GetState(), statusString(err), strings.Join(checks, "; "))
	}
	if c, ok := f.counters(t, role, e); ok && c[obsQuarantineBuffers] < 1 {
		t.Fatalf("GetLoad(%s) %s = %v %s; want >= 1", role, obsQuarantineBuffers, c[obsQuarantineBuffers], why)
	}
}

// restartRoles replaces the instances of roles (quarantine is sticky until
// restart, Q-4) and brings the machine up to date: a new consumer has
// nothing in flight; a new producer has an empty table, so the old one's
// references leave the model. It runs deferred, also after a failure.
func (f *faultMachine) restartRoles(t *rapid.T, roles ...target.Role) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, role := range roles {
		if err := f.restart.Restart(ctx, role); err != nil {
			t.Errorf("harness: restart %s: %v", role, err)
			return
		}
		e, ok := f.tg.Engine(role)
		if !ok {
			t.Errorf("harness: no %s after its restart", role)
			return
		}
		switch role {
		case target.RoleConsumer:
			f.cons = e
			f.m.uncertainConsumes = 0
		case target.RoleProducer:
			f.prod = e
			f.m.refs, f.m.orphans = nil, 0
			f.entries0, f.inherited = 0, 0
			if c, ok := f.counters(t, "producer", e); ok {
				f.entries0 = int(c[obsEntries])
			}
		}
	}
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
