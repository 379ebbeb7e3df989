package sim

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
}

// SetTransferFaults makes the next transfer calls get faults in order, then
// none, and forgets the calls seen so far. delayMs applies to DirectedDelay.
func (d *Driver) SetTransferFaults(delayMs int64, faults ...DirectedFault) {
	d.w.dir = &directed{plan: append([]DirectedFault(nil), faults...), delayMs: delayMs, byRecv: map[int64]int{}, held: map[int64]bool{}}
}

// TransferCalls returns the transfer calls seen since SetTransferFaults.
func (d *Driver) TransferCalls() []DirectedCall {
	if d.w.dir == nil {
		return nil
	}
	return append([]DirectedCall(nil), d.w.dir.calls...)
}

// RestartConsumer crashes consumer pd and boots its next incarnation at
// once (quarantine is sticky until restart, Q-4); orphan recovery runs as
// after any crash. Errors: ErrDriver when a checker fires.
func (d *Driver) RestartConsumer(pd int) error {
	w := d.w
	if pd < 0 || pd >= len(w.cons) {
		return fmt.Errorf("%w: no consumer %d", ErrDriver, pd)
	}
	c := w.cons[pd]
	w.crash(event{kind: evCrash, c: int32(pd)})
	w.restart(event{kind: evRestart, c: int32(pd), a: c.inc})
	w.checkStep()
	if w.fail != nil {
		return fmt.Errorf("%w: %s", ErrDriver, w.fail.msg)
	}
	return nil
}

// ConsumerIncarnation is consumer pd's incarnation (0 at boot, +1 per restart).
func (d *Driver) ConsumerIncarnation(pd int) int64 { return d.w.cons[pd].inc }

// directRequest sends receive r's transfer request under the directed plan:
// false when it is delivered as usual (the caller sends it).
func (w *World) directRequest(r *recv) (handled bool) {
	dir := w.dir
	if dir == nil {
		return false
	}
	f := DirectedNone
	if len(dir.plan) > 0 {
		f, dir.plan = dir.plan[0], dir.plan[1:]
	}
	dir.byRecv[r.num] = len(dir.calls)
	dir.calls = append(dir.calls, DirectedCall{Fault: f})
	reply := event{kind: evTransferReply, c: int32(w.xreqs[r.num-1].c), a: r.num}
	switch f {
	case DirectedDropRequest:
		w.notef("directed fault: transfer request of %s dropped", r.key)
		return true
	case DirectedUnavailable:
		reply.b = resUnavailable
	case DirectedInvalidArgument:
		reply.b = resPlainInvalid
	default:
		return false
	}
	w.notef("directed fault: transfer request of %s answered %s without reaching E", r.key, resNames[reply.b])
	w.after(1, reply)
	return true
}

// directArrive records that the producer received receive num's request.
func (w *World) directArrive(num int64) {
	if w.dir == nil {
		return
	}
	if i, ok := w.dir.byRecv[num]; ok {
		w.dir.calls[i].Reached = true
	}
}

// directReply applies the directed plan to a transfer reply arriving at
// the consumer: true when the reply is dropped or held (not delivered now).
func (w *World) directReply(ev *event) bool {
	dir := w.dir
	if dir == nil {
		return false
	}
	i, ok := dir.byRecv[ev.a]
	if !ok {
		return false
	}
	call := &dir.calls[i]
	if call.Reached && !call.Answered {
		call.Answered, call.Code = true, answerCodes[ev.b]
	}
	switch call.Fault {
	case DirectedDropReply:
		w.notef("directed fault: reply %s for receive %d lost", resNames[ev.b], ev.a)
		return true
	case DirectedDelay:
		if !dir.held[ev.a] {
			dir.held[ev.a] = true
			w.notef("directed fault: reply %s for receive %d held %d ms", resNames[ev.b], ev.a, dir.delayMs)
			w.after(dir.delayMs, *ev)
			return true
		}
	case DirectedCut:
		ev.b = resUnavailable
	}
	return false
}
