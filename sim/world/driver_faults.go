package world

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// DirectedFault is a fault a Driver's caller puts on the next transfer
// calls (TransferEncoderCache) of the world, the simulator's counterpart of
// the harness's fault proxy (conformance/faultproxy): the property suites
// choose where a fault lands instead of the seed's BUGGIFY sites.
type DirectedFault int

// Directed faults, as the consumer sees them (each but DirectedNone leaves
// it an uncertain outcome, CONTRACT ).
const (
	// DirectedNone: the call goes through untouched.
	DirectedNone DirectedFault = iota
	// DirectedDropRequest: never delivered; the consumer's deadline passes.
	DirectedDropRequest
	// DirectedDropReply: delivered, the producer acts on it, the reply is lost.
	DirectedDropReply
	// DirectedDelay: delivered; the reply is held for the delay given to
	// SetTransferFaults (virtual ms), past the consumer's deadline if longer.
	DirectedDelay
	// DirectedCut: delivered; once the producer answered, the connection is
	// cut and the consumer sees UNAVAILABLE.
	DirectedCut
	// DirectedUnavailable: never delivered; answered UNAVAILABLE at once.
	DirectedUnavailable
	// DirectedInvalidArgument: never delivered; answered INVALID_ARGUMENT
	// without the before-write trailer (still uncertain, Q-2).
	DirectedInvalidArgument
)

// DirectedCall is what the world saw of one transfer call since the last
// SetTransferFaults.
type DirectedCall struct {
	Fault DirectedFault
	// Reached: the producer received the call (and so may have acted on it).
	Reached bool
	// Answered: the producer answered; Code is its answer.
	Answered bool
	Code     handoff.Code
}

// directed is the Driver's plan of faults and the calls it saw.
type directed struct {
	plan    []DirectedFault
	delayMs int64
	calls   []DirectedCall
	// byRecv maps a receive number to its call; held marks a delayed
	// reply already held once.
	byRecv map[int64]int
	held   map[int64]bool
	// park: a delayed reply is parked instead of rescheduled (HoldDelays),
	// until ReleaseHeld; parked holds it meanwhile.
	park   bool
	parked *Event
	// deadline is each receive's own transfer deadline (virtual ms).
	deadline map[int64]int64
}

// SetTransferFaults makes the next transfer calls get faults in order, then
// none, and forgets the calls seen so far. delayMs applies to DirectedDelay.
func (d *Driver) SetTransferFaults(delayMs int64, faults ...DirectedFault) {
	d.w.dir = &directed{plan: append([]DirectedFault(nil), faults...), delayMs: delayMs, byRecv: map[int64]int{}, held: map[int64]bool{}, deadline: map[int64]int64{}}
}

// TransferCalls returns the transfer calls seen since SetTransferFaults.
func (d *Driver) TransferCalls() []DirectedCall {
	if d.w.dir == nil {
		return nil
	}
	return append([]DirectedCall(nil), d.w.dir.calls...)
}

// RestartConsumer crashes consumer pd and boots its next incarnation at
// once (a quarantine lasts until its Q-6 proof or the restart, Q-4), as
// after any crash (a claimed file it left is E's CollectOrphans' to
// take). Errors: ErrDriver when a checker fires.
func (d *Driver) RestartConsumer(pd int) error {
	w := d.w
	if pd < 0 || pd >= len(w.Cons) {
		return fmt.Errorf("%w: no consumer %d", ErrDriver, pd)
	}
	c := w.Cons[pd]
	w.RunNow(ConsumerStep{Consumer: int32(pd)}.Event(EvCrash))
	w.RunNow(ConsumerStep{Consumer: int32(pd), Inc: c.Inc}.Event(EvRestart))
	w.CheckStep()
	if w.Fail != nil {
		return fmt.Errorf("%w: %s", ErrDriver, w.Fail.Msg)
	}
	return nil
}

// ConsumerIncarnation is consumer pd's incarnation (0 at boot, +1 per restart).
func (d *Driver) ConsumerIncarnation(pd int) int64 { return d.w.Cons[pd].Inc }

// DirectRequest sends receive r's transfer request under the directed plan:
// false when it is delivered as usual (the caller sends it).
func (w *World) DirectRequest(r *Recv) (handled bool) {
	dir := w.dir
	if dir == nil {
		return false
	}
	f := DirectedNone
	if len(dir.plan) > 0 {
		f, dir.plan = dir.plan[0], dir.plan[1:]
	}
	dir.byRecv[r.Num] = len(dir.calls)
	dir.calls = append(dir.calls, DirectedCall{Fault: f})
	dir.deadline[r.Num] = w.Now + w.Set.ConsumerTimeoutMs
	reply := TransferReply{Consumer: int32(w.Xreqs[r.Num-1].C), Recv: r.Num}
	switch f {
	case DirectedDropRequest:
		if w.Tracing {
			w.Notef("directed fault: transfer request of %s dropped", r.Key)
		}
		return true
	case DirectedUnavailable:
		reply.Result = ResUnavailable
	case DirectedInvalidArgument:
		reply.Result = ResPlainInvalid
	default:
		return false
	}
	if w.Tracing {
		w.Notef("directed fault: transfer request of %s answered %s without reaching E", r.Key, ResNames[reply.Result])
	}
	w.After(1, reply.Event())
	return true
}

// DirectArrive records that the producer received receive num's request.
func (w *World) DirectArrive(num int64) {
	if w.dir == nil {
		return
	}
	if i, ok := w.dir.byRecv[num]; ok {
		w.dir.calls[i].Reached = true
	}
}

// DirectReply applies the directed plan to a transfer reply arriving at
// the consumer: true when the reply is dropped or held (not delivered now).
func (w *World) DirectReply(ev *Event) bool {
	dir := w.dir
	if dir == nil {
		return false
	}
	rep := TransferReplyOf(*ev)
	i, ok := dir.byRecv[rep.Recv]
	if !ok {
		return false
	}
	call := &dir.calls[i]
	if call.Reached && !call.Answered {
		call.Answered, call.Code = true, AnswerCodes[rep.Result]
	}
	switch call.Fault {
	case DirectedDropReply:
		if w.Tracing {
			w.Notef("directed fault: reply %s for receive %d lost", ResNames[rep.Result], rep.Recv)
		}
		return true
	case DirectedDelay:
		if !dir.held[rep.Recv] {
			dir.held[rep.Recv] = true
			if dir.park {
				if w.Tracing {
					w.Notef("directed fault: reply %s for receive %d parked", ResNames[rep.Result], rep.Recv)
				}
				held := *ev
				dir.parked = &held
				return true
			}
			if w.Tracing {
				w.Notef("directed fault: reply %s for receive %d held %d ms", ResNames[rep.Result], rep.Recv, dir.delayMs)
			}
			w.After(dir.delayMs, *ev)
			return true
		}
	case DirectedCut:
		ev.setTransferResult(ResUnavailable)
	}
	return false
}

// HoldDelays makes a DirectedDelay park its reply (instead of delivering
// it delayMs of virtual time later) until ReleaseHeld: an adapter whose
// caller holds a reply in real time (simtarget) steps the world with
// StartConsume, answers other calls while the reply is parked, and
// releases it when the caller's hold ends.
func (d *Driver) HoldDelays() {
	if d.w.dir != nil {
		d.w.dir.park = true
	}
}

// Held reports whether a transfer reply is parked.
func (d *Driver) Held() bool { return d.w.dir != nil && d.w.dir.parked != nil }

// HeldDeadlineIn is the virtual time (ms) from now until the consumer's
// own deadline on the receive whose reply is parked (0 once passed, -1
// when nothing is parked).
func (d *Driver) HeldDeadlineIn() int64 {
	dir := d.w.dir
	if dir == nil || dir.parked == nil {
		return -1
	}
	return max(0, dir.deadline[dir.parked.a]-d.w.Now)
}

// Advance steps every event due within ms of virtual time (the parked
// reply stays parked) and moves the clock ms on: the consumer's deadline
// may pass during a hold. Errors: ErrDriver.
func (d *Driver) Advance(ms int64) error {
	w := d.w
	until := w.Now + ms
	if err := d.stepWhile(func() bool { return w.Q.len() > 0 && w.Q.at(0).Tick <= until }); err != nil {
		return err
	}
	w.Now = until
	return nil
}

// Pending is a consume started by StartConsume whose answer is not in yet.
type Pending struct{ c *Client }

// Answered reports whether the pending consume's call has been answered.
func (p *Pending) Answered() bool { return p.c.answered }

// StartConsume consumes entry on consumer pd and steps until the call is
// answered or its transfer reply is parked (then p is not nil and Finish,
// after ReleaseHeld, or Cancel ends it). Errors: ErrDriver.
func (d *Driver) StartConsume(entry string, pd int) (a Answer, p *Pending, err error) {
	if _, ok := d.w.Ledger.Entries[entry]; !ok {
		return Answer{Code: handoff.CodeInvalidArgument}, nil, nil
	}
	c := d.newClient(0, 0, entry)
	c.manual, c.answered = true, false
	d.w.consume(c, pd, StageConsuming)
	if err := d.stepWhile(func() bool { return !c.answered && !d.Held() }); err != nil {
		return Answer{}, nil, err
	}
	if !c.answered {
		return Answer{}, &Pending{c: c}, nil
	}
	return Answer{Code: AnswerCodes[c.lastRes]}, nil, nil
}

// ReleaseHeld delivers the parked reply heldMs of virtual time from now
// (the hold's length, so a hold past the consumer's deadline ends in its
// timeout first, Q-1) and steps until the receive it answers has ended
// (the consumer knows the outcome). Errors: ErrDriver.
func (d *Driver) ReleaseHeld(heldMs int64) error {
	dir := d.w.dir
	if dir == nil || dir.parked == nil {
		return nil
	}
	ev := *dir.parked
	dir.parked = nil
	d.w.After(heldMs, ev)
	rep := TransferReplyOf(ev)
	c := d.w.Cons[rep.Consumer]
	return d.stepWhile(func() bool { _, open := c.Recvs[rep.Recv]; return open })
}

// Finish steps a pending consume until it is answered (after ReleaseHeld).
// Errors: ErrDriver.
func (d *Driver) Finish(p *Pending) (Answer, error) {
	if err := d.stepWhile(func() bool { return !p.c.answered }); err != nil {
		return Answer{}, err
	}
	return Answer{Code: AnswerCodes[p.c.lastRes]}, nil
}

// Cancel cancels a pending consume as its client does (C-4): the consumer
// hears the cancel, the call is answered CANCELLED at once and its later
// reply is stale; the receive itself waits for the transfer's outcome.
func (d *Driver) Cancel(p *Pending, pd int) {
	c := p.c
	d.w.behaviour.ConsumerCancelled(d.w, d.w.Cons[pd], int32(c.Idx), c.Rpc)
	c.Rpc++
	c.answered, c.lastRes = true, ResCancelled
	d.w.CheckStep()
}

// stepWhile steps the world while more() holds, with every checker after
// every step. Errors: ErrDriver (a checker fired, or the world stalled).
func (d *Driver) stepWhile(more func() bool) error {
	w := d.w
	for i := 0; more(); i++ {
		if w.Fail != nil {
			return fmt.Errorf("%w: %s", ErrDriver, w.Fail.Msg)
		}
		ev, ok := w.Q.Pop()
		if !ok || i == d.maxSteps {
			return fmt.Errorf("%w: the world stalled", ErrDriver)
		}
		w.Now = ev.Tick
		w.Steps++
		w.Dispatch(ev)
		w.CheckStep()
	}
	if w.Fail != nil {
		return fmt.Errorf("%w: %s", ErrDriver, w.Fail.Msg)
	}
	return nil
}
