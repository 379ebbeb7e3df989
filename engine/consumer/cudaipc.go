package consumer

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
)

// The cuda_ipc receive's buffer life (engine/xfer/cuda_ipc.go says the
// protocol): one receive buffer on the consumer's device, into which the
// consumer itself copies the producer's lent allocation. The producer
// never writes it, so a quarantined buffer ends once the control
// connections that may have carried the request have closed, or, after a
// failed copy, never unless the device synchronizes. The call to the
// producer, the loan's return (Abort) and the pinning of its client stay
// with the caller (engine/server: gRPC).

// IPCReceive is one cuda_ipc receive: its id and its receive buffer on
// Driver.Device (the reference's payload bytes, the items back to back).
type IPCReceive struct {
	// ID is the receive's id in Receives.
	ID string
	// Dst is the receive buffer on Driver.Device: the reference's payload
	// bytes, the items back to back.
	Dst xfer.DeviceBuffer
}

// BeginIPC admits a receive of payloadBytes (Q-4, L-5:
// handoff.ErrQuarantined, handoff.ErrTooLarge, from Receives.Preflight)
// and allocates its receive buffer on the device. An allocation that fails
// ends the receive (nothing was sent: REJECTED) with that error.
func (d *Driver) BeginIPC(receiveID string, payloadBytes int64) (*IPCReceive, error) {
	d.Env.Lock()
	err := d.Receives.Preflight(receiveID, payloadBytes)
	d.Env.Unlock()
	if err != nil {
		return nil, err
	}
	dst, err := d.Device.Alloc(int(payloadBytes))
	if err != nil {
		d.reject(receiveID) // nothing was sent: no buffer exists
		return nil, fmt.Errorf("server: cuda_ipc: allocate the receive buffer: %w", err)
	}
	return &IPCReceive{ID: receiveID, Dst: dst}, nil
}

// UnsentIPC ends a receive before its request was sent (nothing can touch
// its buffer: REJECTED) and frees its buffer.
func (d *Driver) UnsentIPC(r *IPCReceive) {
	d.reject(r.ID)
	d.ReleaseIPC(r)
}

// ReleaseIPC frees the receive buffer of a receive the core released
// (handoff.ReleaseBuffers, or ended by handoff.ClientCancelled under the
// C-4 mutant); a failed free is a cleanup failure.
func (d *Driver) ReleaseIPC(r *IPCReceive) {
	if err := d.Device.Free(r.Dst); err != nil {
		d.Env.FailCleanup("free the cuda_ipc receive buffer", err)
	}
}

// EndCopy lets the core decide how a receive whose own copy ended ends
// (handoff.EndCopy) and carries it out: the buffer freed (nil),
// or quarantined with mapping (the producer's allocation as opened here;
// nil when none is open) until every proof is closed, for the life of the
// process when proofs is nil (QuarantineIPC's error then).
func (d *Driver) EndCopy(r *IPCReceive, ev handoff.CopyEnded, mapping xfer.DeviceBuffer, proofs []<-chan struct{}) error {
	d.Env.Lock()
	dec, err := d.Receives.EndCopy(ev)
	d.Env.Unlock()
	d.Env.CoreRefused("EndCopy "+ev.ReceiveID, err)
	if dec.Buffers == handoff.QuarantineBuffers {
		return d.QuarantineIPC(r, mapping, dec, ev.Reason, proofs)
	}
	d.ReleaseIPC(r)
	return nil
}

// FailedCopy ends a receive whose device copy (or download) failed; cause
// says what failed. If the device then synchronizes, nothing runs on it
// any more: the mapping (nil when none is open) is closed, the loan
// given back (giveBack, nil when there is none to give back), the buffer
// freed, and FailedCopy returns nil: the caller answers a failed receive
// (UNAVAILABLE) without a quarantine. Otherwise the core quarantines the
// buffer and the mapping for the life of the process and FailedCopy
// returns QuarantineIPC's error.
func (d *Driver) FailedCopy(r *IPCReceive, mapping xfer.DeviceBuffer, cause string, giveBack func()) error {
	if err := d.Device.Synchronize(); err != nil {
		cause += "; the device does not synchronize: " + err.Error()
		ev := handoff.CopyEnded{ReceiveID: r.ID, Reason: QuarantineReason("Q-1", "receive "+r.ID, "cuda_ipc outcome uncertain: "+cause)}
		if err := d.EndCopy(r, ev, mapping, nil); err != nil { // handoff decides: quarantined for the life of the process
			return err
		}
	}
	if mapping != nil {
		if err := d.Device.Free(mapping); err != nil {
			d.Env.FailCleanup("close a cuda_ipc mapping after a failed copy", err)
		}
	}
	if giveBack != nil {
		giveBack()
	}
	err := d.EndCopy(r, handoff.CopyEnded{ReceiveID: r.ID, Quiesced: true}, nil, nil) // a quiesced copy is released: nil
	d.Log.Warn("cuda_ipc copy failed; the device synchronized, so nothing touches the buffer any more (Q-6)", "receive", r.ID, "err", cause)
	return err
}

// QuarantineIPC carries out a quarantine the core decided (dec: already
// UNCERTAIN): it keeps r's buffer (and mapping, when not nil) until every
// proof is closed, for the life of the process when proofs is nil (Q-1,
// Q-6), turns health NOT_READY (Q-4, dec.Health), and returns the
// consumer's answer, handoff.ErrTransferUncertain (UNAVAILABLE, Q-1).
// cause is the failure, for the log and the answer.
func (d *Driver) QuarantineIPC(r *IPCReceive, mapping xfer.DeviceBuffer, dec handoff.ReceiveDecision, cause string, proofs []<-chan struct{}) error {
	receiveID, dst, dev := r.ID, r.Dst, d.Device
	d.Env.EnterQuarantine(&Quarantine{ID: "receive/" + receiveID, Reason: dec.Health.Reason,
		Keep: []xfer.DeviceBuffer{dst, mapping},
		End:  func() { d.Env.CoreRefused("EndQuarantine "+receiveID, d.Receives.EndQuarantine(receiveID)) },
		Free: func() error {
			if mapping != nil {
				if err := dev.Free(mapping); err != nil {
					return err
				}
			}
			return dev.Free(dst)
		}}, proofs)
	d.Log.Error("Q-1 cuda_ipc outcome uncertain; receive buffer quarantined", "receive", receiveID, "err", cause)
	return fmt.Errorf("%w: Q-1 transfer outcome uncertain (%s); its buffers are quarantined", handoff.ErrTransferUncertain, cause)
}
