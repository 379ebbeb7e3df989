package producer

import (
	"github.com/baton-dev/baton/engine/cache"
	"github.com/baton-dev/baton/engine/cache/cudaipc"
	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/handoff"
)

// The cuda_ipc lend (engine/xfer/cuda_ipc.go says the protocol): after the
// claim the entry's device allocation is lent to the caller's process,
// which maps it and copies out of it, and comes back with the borrower's
// Abort(encoder_cache). A lent source is freed only when its loan comes
// back, never by a timer, since the consumer's process may still map it
// (CONTRACT Q-6); a source whose lend failed half-way is quarantined
// for the life of the process: nothing proves that no process maps
// it. The checks before the claim, the claim and the gRPC answer stay
// with the caller (engine/server).

// Lend records entry (taken out of Loans after the caller's
// Table.ClaimForTransfer) as lent to borrower, the network peer of the
// TransferEncoderCache call (only that peer's Abort gives it back:
// ReturnLoan), and tells the core the transfer is done (TransferDone).
func (d *Driver) Lend(id string, entry *cudaipc.Entry, borrower string) {
	d.Loans.Lend(id, entry, borrower)
	d.Env.Lock()
	terr := d.Table.TransferDone(id)
	d.Env.Unlock()
	d.Env.CoreRefused("TransferDone "+id, terr)
	d.Log.Info("lent", "entry", id, "bytes", entry.Loan.Bytes, "backend", cache.BackendCUDAIPC)
}

// FailLend lets the core decide what a lend that failed after the entry
// left the table does with its source (handoff.FailTransfer, Q-3) and
// carries it out: the source quarantined for the life of the process (no
// Q-6 proof exists: a process may map it), or, under the Q-3 source
// mutant (FreedEarly), freed at once with Health NOT_READY for as long as
// the contract's quarantine would last. entry is nil when the source was
// missing. cause is the failure, for the log. It returns the decision,
// whose Code the caller answers.
func (d *Driver) FailLend(ev handoff.TransferFailure, entry *cudaipc.Entry, cause error) handoff.TransferFailedDecision {
	id := ev.EntryID
	dec := d.decideFailedTransfer(ev)
	switch dec.Source {
	case handoff.SourceNone:
	case handoff.FreeSource: // the Q-3 source mutant (FreedEarly): freed while a process may map it
		if err := d.Loans.Free(entry); err != nil {
			d.Env.FailCleanup("free the cuda_ipc source of "+cache.Short(id), err)
		}
		if dec.FreedEarly {
			d.Env.EnterQuarantine(&consumer.Quarantine{ID: "source/" + id, Reason: dec.Health.Reason}, nil)
		}
	default:
		d.Loans.Quarantine(entry)
		d.Env.EnterQuarantine(&consumer.Quarantine{ID: "source/" + id, Reason: dec.Health.Reason, Keep: entry}, nil)
	}
	d.Log.Error("Q-3 cuda_ipc loan failed after removal; source quarantined", "entry", id, "err", cause)
	return dec
}

// ReturnLoan frees the lent source of entry id that its borrower (caller:
// the peer of the TransferEncoderCache call that was lent it) gives back
// with Abort(encoder_cache); lent is false when the entry is not lent (or
// the store is not cuda_ipc's: Loans nil). An Abort of a lent entry from
// another peer (a client racing the consume, or one that kept the
// reference) answers the same, consumed, and frees nothing: the consumer
// may not have opened the handle yet (CONTRACT Q-6: a lent allocation is
// freed only once no process maps it). A failed free is a cleanup failure
//
func (d *Driver) ReturnLoan(id, caller string) (lent bool) {
	if d.Loans == nil {
		return false
	}
	lent, returned, err := d.Loans.GiveBack(id, caller)
	if err != nil {
		d.Env.FailCleanup("free the returned cuda_ipc loan of "+cache.Short(id), err)
	}
	switch {
	case returned:
		d.Log.Info("loan returned", "entry", id)
	case lent:
		d.Log.Info("Abort of a lent entry by a peer other than its borrower: the loan stays out", "entry", id, "caller", caller)
	}
	return lent
}
