package consumer

import "github.com/baton-dev/baton/engine/handoff"

// The transitions of handoff.ConsumerReceives, each checked after it
// (-tags invariants). engine/server's TestCheckedTablesWrapEveryTransition
// fails when the core gains a transition that is not wrapped here.

// Preflight admits a receive of payloadBytes (Q-4, L-5): handoff.ErrQuarantined,
// handoff.ErrTooLarge.
func (r *Receives) Preflight(id string, payloadBytes int64) error {
	err := r.ConsumerReceives.Preflight(id, payloadBytes)
	r.checked("Preflight", id)
	return err
}

// SetBuffers records the receive's n buffers.
func (r *Receives) SetBuffers(id string, n int) error {
	err := r.ConsumerReceives.SetBuffers(id, n)
	r.checked("SetBuffers", id)
	return err
}

// Registered marks the receive's buffers registered.
func (r *Receives) Registered(id string) error {
	err := r.ConsumerReceives.Registered(id)
	r.checked("Registered", id)
	return err
}

// Requested marks the receive's request sent.
func (r *Receives) Requested(id string) error {
	err := r.ConsumerReceives.Requested(id)
	r.checked("Requested", id)
	return err
}

// Succeeded ends the receive with its data.
func (r *Receives) Succeeded(id string) error {
	err := r.ConsumerReceives.Succeeded(id)
	r.checked("Succeeded", id)
	return err
}

// Rejected ends the receive with a definite outcome: nothing can write
// its buffers.
func (r *Receives) Rejected(id string) error {
	err := r.ConsumerReceives.Rejected(id)
	r.checked("Rejected", id)
	return err
}

// Uncertain ends the receive with its buffers quarantined.
func (r *Receives) Uncertain(id string) error {
	err := r.ConsumerReceives.Uncertain(id)
	r.checked("Uncertain", id)
	return err
}

// EndQuarantine ends an uncertain receive's quarantine.
func (r *Receives) EndQuarantine(id string) error {
	err := r.ConsumerReceives.EndQuarantine(id)
	r.checked("EndQuarantine", id)
	return err
}

// EndTransfer decides how a receive whose call ended ends
// and applies it; the caller carries the decision out.
func (r *Receives) EndTransfer(ev handoff.TransferEnded, m handoff.Mutants) (handoff.ReceiveDecision, error) {
	d, err := r.ConsumerReceives.EndTransfer(ev, m)
	r.checked("EndTransfer", ev.ReceiveID)
	return d, err
}

// ClientCancelled decides what a client's cancellation does to a receive
// in flight (C-4: nothing, the consumer waits for the outcome).
func (r *Receives) ClientCancelled(id string, m handoff.Mutants) (handoff.ReceiveDecision, bool, error) {
	d, ended, err := r.ConsumerReceives.ClientCancelled(id, m)
	r.checked("ClientCancelled", id)
	return d, ended, err
}

// EndCopy decides how a cuda_ipc receive whose own copy ended ends (Q-1,
// Q-6) and applies it.
func (r *Receives) EndCopy(ev handoff.CopyEnded) (handoff.ReceiveDecision, error) {
	d, err := r.ConsumerReceives.EndCopy(ev)
	r.checked("EndCopy", ev.ReceiveID)
	return d, err
}
