package consumer

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
)

// Env is what the consumer's receive driver needs of the engine around it
// (engine/server implements it): its lock, which guards Receives and is
// never held across I/O, and the engine-wide consequences of a
// receive's end.
type Env interface {
	// Locker is the engine's lock (engine/server: Engine.mu).
	sync.Locker
	// FailCleanup records a cleanup failure (X-1: sticky NOT_READY). Call
	// without the lock.
	FailCleanup(what string, err error)
	// CoreRefused logs a transition the core refused (a bug); err nil is
	// nothing. Safe with or without the lock.
	CoreRefused(op string, err error)
	// EnterQuarantine records q, turns Health NOT_READY and ends q
	// once every proof is closed (Q-6; never for nil proofs). Call
	// without the lock.
	EnterQuarantine(q *Quarantine, proofs []<-chan struct{})
	// Decisions are the core's mutant switches (handoff.Mutants; the zero
	// value is the contract's core).
	Decisions() handoff.Mutants
}

// Driver is the consumer's receive driver for the transfer backends: it
// owns the receive buffers' life (register or allocate, release,
// quarantine) and carries out what the core (Receives) decides. The call
// to the producer stays with the caller (engine/server: gRPC), between
// BeginTCP and EndTCP for tcp, between BeginIPC and EndTransfer or EndCopy
// for cuda_ipc (cudaipc.go).
type Driver struct {
	// Receives is the receive table whose decisions the driver carries out;
	// guarded by Env's lock.
	Receives *Receives
	// Env is the engine around the driver: its lock, X-1, quarantine,
	// switches.
	Env Env
	// Agent is the tcp backend's transfer agent (nil for cuda_ipc).
	Agent xfer.Agent
	// Device is the cuda_ipc backend's device (nil for tcp), on which the
	// receive buffers are allocated and the producers' loans opened.
	Device xfer.IPCDevice
	// Log receives the driver's events: quarantines, failed revocations,
	// failed copies.
	Log *slog.Logger
}

// TCPReceive is one tcp receive: its id, its buffers (one per item, of the
// item's bytes) and their registration with the transfer agent.
type TCPReceive struct {
	// ID is the receive's id in Receives.
	ID string
	// Bufs holds one receive buffer per item, each of the item's payload
	// bytes, in item order.
	Bufs [][]byte
	// Reg is Bufs' registration with Driver.Agent, which the producer's
	// WRITE targets; revoked or deregistered when the receive ends.
	Reg *xfer.Registration
}

// BeginTCP admits a receive of items (Q-4, L-5: handoff.ErrQuarantined,
// handoff.ErrTooLarge, from Receives.Preflight), allocates one buffer per
// item and registers them with the agent. A registration that fails ends
// the receive (nothing was sent: REJECTED) with that error.
func (d *Driver) BeginTCP(receiveID string, items []handoff.ItemMeta) (*TCPReceive, error) {
	var payloadBytes int64
	for _, it := range items {
		payloadBytes += it.PayloadBytes()
	}
	d.Env.Lock()
	err := d.Receives.Preflight(receiveID, payloadBytes)
	if err == nil {
		d.Env.CoreRefused("SetBuffers "+receiveID, d.Receives.SetBuffers(receiveID, len(items)))
	}
	d.Env.Unlock()
	if err != nil {
		return nil, err
	}
	bufs := make([][]byte, len(items))
	for i, it := range items {
		bufs[i] = make([]byte, it.PayloadBytes())
	}
	reg, err := d.Agent.RegisterMemory(bufs)
	if err != nil {
		d.reject(receiveID) // nothing was sent: the buffers are ours
		return nil, fmt.Errorf("server: register receive buffers: %w", err)
	}
	return &TCPReceive{ID: receiveID, Bufs: bufs, Reg: reg}, nil
}

// Unsent ends a receive before its request was sent (nothing can write
// its buffers: REJECTED) and deregisters its buffers.
func (d *Driver) Unsent(r *TCPReceive) {
	d.reject(r.ID)
	d.Release(r)
}

// reject ends receive id REJECTED (Receives.Rejected: nothing was sent,
// so nothing can write its buffers, Q-2); a refused transition is a bug,
// logged (Env.CoreRefused).
func (d *Driver) reject(id string) {
	d.Env.Lock()
	err := d.Receives.Rejected(id)
	d.Env.Unlock()
	d.Env.CoreRefused("Rejected "+id, err)
}

// Release deregisters the buffers of a receive the core released
// (handoff.ReleaseBuffers, or ended by handoff.ClientCancelled under the
// C-4 mutant); a deregistration failure is a cleanup failure.
func (d *Driver) Release(r *TCPReceive) {
	if err := d.Agent.Deregister(r.Reg); err != nil {
		d.Env.FailCleanup("deregister receive buffers", err)
	}
}

// EndTCP lets the core decide how a receive whose call ended ends
// (handoff.EndTransfer) and carries the decision out: the
// buffers released, or quarantined (Quarantine) until the revocation and
// every carrier prove that nothing can write them, never when the
// decision says NoProof. cause is the call's failure, for the log. It
// returns the decision, whose Reply the caller answers.
func (d *Driver) EndTCP(r *TCPReceive, ev handoff.TransferEnded, cause error, carriers []<-chan struct{}) handoff.ReceiveDecision {
	dec := d.EndTransfer(ev)
	if dec.Buffers == handoff.QuarantineBuffers {
		if dec.NoProof {
			carriers = nil // the Q-2 mutant's uncertain outcome, which nothing can end
		}
		d.Quarantine(r, cause, carriers, dec)
	} else {
		d.Release(r)
	}
	return dec
}

// EndTransfer lets the core decide how a receive whose call ended ends
// (handoff.EndTransfer) and applies the transition; the
// caller carries the decision out (EndTCP does for a tcp receive). A
// refused transition is a bug, logged (Env.CoreRefused).
func (d *Driver) EndTransfer(ev handoff.TransferEnded) handoff.ReceiveDecision {
	d.Env.Lock()
	dec, err := d.Receives.EndTransfer(ev, d.Env.Decisions())
	d.Env.Unlock()
	d.Env.CoreRefused("EndTransfer "+ev.ReceiveID, err)
	return dec
}

// Quarantine carries out a quarantine the core decided (dec: already
// UNCERTAIN in the core): it keeps the receive's buffers, turns
// health NOT_READY (Q-4, dec.Health), and revokes their registration at
// once: from then on every write addressed to them is refused. The
// quarantine ends once the revocation is done (no write in flight,
// every agent connection that carried one closed) and every control
// connection that may have carried the request (carriers) has closed;
// never when dec.NoProof. The server retires the producer client of those
// control connections (it closes them once no other call uses it), so a
// live producer whose idle connection stays healthy does not hold the
// quarantine for as long as it lives.
func (d *Driver) Quarantine(r *TCPReceive, cause error, carriers []<-chan struct{}, dec handoff.ReceiveDecision) {
	receiveID := r.ID
	q := &Quarantine{ID: "receive/" + receiveID, Reason: dec.Health.Reason, Keep: r.Bufs,
		End: func() { d.Env.CoreRefused("EndQuarantine "+receiveID, d.Receives.EndQuarantine(receiveID)) }}
	var proofs []<-chan struct{}
	if done, err := d.Agent.Revoke(r.Reg); err != nil {
		d.Log.Error("Q-1 revoking quarantined receive buffers failed; kept for the life of the process", "receive", receiveID, "err", err)
	} else if !dec.NoProof {
		proofs = append([]<-chan struct{}{done}, carriers...)
	}
	d.Env.EnterQuarantine(q, proofs)
	d.Log.Error("Q-1 transfer outcome uncertain; receive buffers quarantined until nothing can write them (Q-6)", "receive", receiveID, "err", cause)
}
