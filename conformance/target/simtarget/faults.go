package simtarget

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim"
	"google.golang.org/grpc/codes"
)

// directedFaults maps the harness's transfer faults onto the world's.
var directedFaults = map[target.TransferFault]sim.DirectedFault{
	target.FaultNone:            sim.DirectedNone,
	target.FaultDropRequest:     sim.DirectedDropRequest,
	target.FaultDropReply:       sim.DirectedDropReply,
	target.FaultDelay:           sim.DirectedDelay,
	target.FaultCutConnection:   sim.DirectedCut,
	target.FaultUnavailable:     sim.DirectedUnavailable,
	target.FaultInvalidArgument: sim.DirectedInvalidArgument,
}

// notify wakes TransferCalls and TransferArrived waiters (t.mu held).
func (t *Target) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// SetTransferFaults implements target.FaultInjector: the next transfer
// calls of the world get faults in order, then none; delay is virtual time
// (ms). Errors: a target made without Options.Faults, another method, an
// unknown fault.
func (t *Target) SetTransferFaults(method string, delay time.Duration, faults ...target.TransferFault) error {
	if !t.profile.FaultProxy {
		return fmt.Errorf("simtarget: made without Options.Faults")
	}
	if method != target.MethodTransferEncoderCache {
		return fmt.Errorf("simtarget: faults only on %s, not %s", target.MethodTransferEncoderCache, method)
	}
	plan := make([]sim.DirectedFault, len(faults))
	for i, f := range faults {
		d, ok := directedFaults[f]
		if !ok {
			return fmt.Errorf("simtarget: unknown transfer fault %q", f)
		}
		plan[i] = d
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.d.SetTransferFaults(delay.Milliseconds(), plan...)
	t.d.HoldDelays()
	t.hold = delay
	return nil
}

// consumeEntry consumes entry on the world's consumer. A reply held by a
// FaultDelay is held in real time, as the fault proxy holds it: the world
// parks it, t.mu is released so other calls are answered meanwhile,
// and when the hold ends the reply is delivered that long later in
// virtual time (after the consumer's 500 ms deadline if the hold is
// longer); a caller that gives up first is answered CANCELLED while the
// receive waits for the outcome (C-4). Called and returns with t.mu held.
func (t *Target) consumeEntry(ctx context.Context, entry string) (sim.Answer, error) {
	a, p, err := t.d.StartConsume(entry, 0)
	if err != nil || p == nil {
		return a, err
	}
	hold := t.hold
	released := make(chan error, 2) // the deadline's and the release's; read once
	release := func(after time.Duration) func() {
		return func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			defer t.notify()
			released <- t.d.ReleaseHeld(after.Milliseconds())
		}
	}
	// The consumer's own deadline may come first: the world's clock runs
	// with the hold, so the receive times out while the reply is
	// still held, and the rest of the hold runs after it.
	if until := time.Duration(t.d.HeldDeadlineIn()) * time.Millisecond; until < hold {
		time.AfterFunc(until, func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			defer t.notify()
			if err := t.d.Advance(until.Milliseconds()); err != nil {
				released <- err
				return
			}
			time.AfterFunc(hold-until, release(hold-until))
			if !p.Answered() {
				return
			}
			released <- nil
		})
	} else {
		time.AfterFunc(hold, release(hold))
	}
	t.notify()
	t.mu.Unlock()
	select {
	case err := <-released:
		t.mu.Lock()
		if err != nil {
			return sim.Answer{}, err
		}
		return t.d.Finish(p)
	case <-ctx.Done():
		t.mu.Lock()
		if !t.d.Held() || p.Answered() {
			return t.d.Finish(p) // the hold or the consumer's deadline ended it first
		}
		t.d.Cancel(p, 0)
		return sim.Answer{Code: handoff.CodeCancelled}, nil
	}
}

var faultNames = func() map[sim.DirectedFault]target.TransferFault {
	m := map[sim.DirectedFault]target.TransferFault{}
	for k, v := range directedFaults {
		m[v] = k
	}
	return m
}()

// TransferCalls implements target.FaultInjector: it waits until n transfer
// calls were seen since SetTransferFaults (or ctx ends) and returns them.
func (t *Target) TransferCalls(ctx context.Context, method string, n int) ([]target.TransferCall, error) {
	for {
		t.mu.Lock()
		calls, changed := t.d.TransferCalls(), t.changed
		t.mu.Unlock()
		if len(calls) >= n {
			out := make([]target.TransferCall, len(calls))
			for i, c := range calls {
				code := ""
				if c.Answered {
					code = target.CodeName(codes.Code(c.Code))
				}
				out[i] = target.TransferCall{Method: method, Fault: faultNames[c.Fault], UpstreamReached: c.Reached, UpstreamCode: code}
			}
			return out, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("simtarget: %d of %d transfer calls seen: %w", len(calls), n, ctx.Err())
		}
	}
}

// TransferArrived implements target.FaultInjector. The world answers each
// call before the next starts, so a call that arrived is also done.
func (t *Target) TransferArrived(ctx context.Context, method string, n int) error {
	_, err := t.TransferCalls(ctx, method, n)
	return err
}

// Restart implements target.Restarter for the consumer: a simulated crash
// and reboot (new instance id, quarantine gone, orphans recovered). The
// producer cannot be restarted (its table is the world's).
func (t *Target) Restart(ctx context.Context, role target.Role) error {
	if role != target.RoleConsumer {
		return fmt.Errorf("simtarget: cannot restart role %s", role)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.notify()
	if err := t.d.RestartConsumer(0); err != nil {
		return err
	}
	t.consID = t.consID[:len(t.consID)-4] + fmt.Sprintf("%04x", t.d.ConsumerIncarnation(0)&0xffff)
	return nil
}
