package producer

import (
	"context"
	"log/slog"
	"time"

	"github.com/baton-dev/baton/engine/cache"
	"github.com/baton-dev/baton/engine/cache/cudaipc"
	"github.com/baton-dev/baton/engine/cache/memory"
	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
)

// Env is what the producer's driver needs of the engine around it
// (engine/server implements it): its lock, which guards Table and is never
// held across I/O, and the engine-wide consequences of a transfer's
// end.
type Env interface {
	// consumer.Env: the lock, X-1, the core-bug log, the quarantine entry
	// and the core's switches, as the consumer's driver needs them.
	consumer.Env
	// RemovalEndedLocked is told, with the lock held, that the removal
	// of entry id ended with err (nil: removed, or gone already); it
	// counts the cleanup done, wakes the releases waiting for a removal
	// in flight (handoff.ReleaseWait) and returns the error the core is
	// told (the engine's baton.cleanup_fail test hook turns a success
	// into a failure, once).
	RemovalEndedLocked(id string, err error) error
	// RemovalsStartedLocked counts n removals started (the cleanups in
	// flight: encoder.cleanup.pending). Call with the lock held.
	RemovalsStartedLocked(n int)
	// RemovalEndLocked returns a channel closed when the next removal of
	// an entry ends (RemovalEndedLocked wakes it), for a release that
	// waits on a removal in flight (handoff.ReleaseWait), and the
	// engine's test hook to call, without the lock, as that release
	// starts waiting (nil: none). Call with the lock held.
	RemovalEndLocked() (ended <-chan struct{}, waiting func(id string))
}

// Driver is the producer's driver. For the tcp backend, after the claim
// (Table.ClaimForTransfer, made by the caller) it owns the source's life:
// the WRITE that reads it, its free, and its quarantine on the core's
// decision. For every backend it carries out a publish's end
// (BeginPublish, publish.go: C-1, C-6, C-7, L-5), a release (Release,
// release.go: SU-1, SU-3) and an entry's removal (FinishRemoval,
// removal.go, S-2). The call itself
// (the checks before the claim, the gRPC answer) stays with the caller
// (engine/server).
type Driver struct {
	// Table is the entry table; guarded by Env's lock.
	Table *Table
	// Env is the engine around the driver: its lock, X-1, quarantine,
	// switches.
	Env Env
	// Agent is the tcp backend's transfer agent, which posts the WRITEs
	// (nil for another backend).
	Agent xfer.Agent
	// Store is the tcp backend's memory store (nil for another backend);
	// Entries is the store of every backend, whose Remove FinishRemoval
	// calls.
	Store *memory.Store
	// Loans is the cuda_ipc backend's store (nil for another backend):
	// Lend, FailLend and ReturnLoan (cudaipc.go) lend and take back its
	// allocations.
	Loans *cudaipc.Store
	// Entries is the entry store of whichever backend is configured;
	// FinishRemoval calls its Remove.
	Entries cache.Store
	// Log receives the driver's events: lends, loan returns, failed
	// removals and transfers.
	Log *slog.Logger
	// CollectorTrustsTable is the X-2 race mutant (engine/server's
	// Hooks.CollectorTrustsTable): an expired entry already gone counts
	// as a failed removal.
	CollectorTrustsTable bool
	// ReleaseAnswersFromTable is the SU-3 race mutant (engine/server's
	// Hooks.ReleaseAnswersFromTable): Release answers ABORTED whoever won
	// the removal.
	ReleaseAnswersFromTable bool
}

// Write creates the WRITE of entry's source to the consumer agent md
// describes (xfer CreateWriteTo: the request keeps its own copy of the
// peer, nothing is loaded into the agent's shared table, so nothing
// outlives the request and no other call can redirect it, A3, A4); loaded
// non-empty is the SharedAgentTable mutant, which writes to whatever the
// agent's table holds for that name now. It posts the WRITE and waits for
// its outcome on the producer's own deadline (timeout), not the caller's:
// a consumer that gave up must not turn a landing write into a freed
// source. No lock is held. pending is the request when it is still
// in flight at the deadline (Release refused): the source may still be
// read until it ends.
func (d *Driver) Write(ctx context.Context, entry *memory.Entry, md []byte, loaded string, remote []xfer.Descriptor, timeout time.Duration) (written uint64, pending *xfer.Request, err error) {
	var xreq *xfer.Request
	if loaded != "" {
		xreq, err = d.Agent.CreateWrite(entry.Reg.Descriptors, loaded, remote)
	} else {
		xreq, err = d.Agent.CreateWriteTo(entry.Reg.Descriptors, md, remote)
	}
	if err != nil {
		return 0, nil, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	st, err := d.Agent.Post(xreq)
	if err == nil && st == xfer.StatusInProgress {
		st, err = xfer.Wait(wctx, d.Agent, xreq)
	}
	if rerr := d.Agent.Release(xreq); rerr != nil {
		if err == nil {
			err = rerr
		}
		return 0, xreq, err
	}
	if err != nil {
		return 0, nil, err
	}
	var n uint64
	for _, r := range remote {
		n += r.Length
	}
	return n, nil, nil
}

// Done ends a transfer whose WRITE landed: the core's TransferDone, then
// the source freed (a deregistration failure is X-1).
func (d *Driver) Done(id string, entry *memory.Entry) {
	d.Env.Lock()
	terr := d.Table.TransferDone(id)
	d.Env.Unlock()
	d.Env.CoreRefused("TransferDone "+id, terr)
	if err := d.Store.Free(entry); err != nil {
		d.Env.FailCleanup("deregister source of "+id, err)
	}
}

// Fail lets the core decide what a transfer that failed after the entry
// left the table does with its source (handoff.FailTransfer, Q-3) and
// carries it out. The source is quarantined until the transport proves
// nothing reads it: freed at once when the WRITE request has ended
// and was released (pending nil), kept until pending ends otherwise, and
// for the life of the process for a failure the transport cannot explain
// (ev.Provable false). entry is nil when the source was missing. cause is
// the failure, for the log. It returns the decision, whose Code the
// caller answers.
func (d *Driver) Fail(ev handoff.TransferFailure, entry *memory.Entry, pending *xfer.Request, cause error) handoff.TransferFailedDecision {
	id := ev.EntryID
	dec := d.decideFailedTransfer(ev)
	switch dec.Source {
	case handoff.SourceNone:
	case handoff.FreeSource:
		if err := d.Store.Free(entry); err != nil {
			d.Env.FailCleanup("deregister source of "+id, err)
		}
		if dec.FreedEarly {
			// The Q-3 source mutant: freed while the WRITE may still read
			// it; Health is NOT_READY for as long as the quarantine the
			// contract makes would last.
			d.Env.EnterQuarantine(&consumer.Quarantine{ID: "source/" + id, Reason: dec.Health.Reason}, d.writeEndProof(id, pending, dec.Source))
			break
		}
		d.Log.Warn("Q-3 transfer failed after removal; its WRITE has ended, so the source is freed (Q-6)", "entry", id, "err", cause)
	default:
		store := d.Store
		store.Quarantine(id, entry)
		q := &consumer.Quarantine{ID: "source/" + id, Reason: dec.Health.Reason, Keep: entry,
			End:  func() { store.Unjail(id) },
			Free: func() error { return store.Free(entry) }}
		d.Env.EnterQuarantine(q, d.writeEndProof(id, pending, dec.Source))
		d.Log.Error("Q-3 transfer failed after removal; source quarantined until its WRITE has ended", "entry", id, "err", cause)
	}
	return dec
}

// decideFailedTransfer lets the core decide what a transfer (tcp WRITE,
// cuda_ipc lend) that failed after the entry left the table does with its
// source (handoff.FailTransfer, Q-3) and applies the transition; the
// caller (Fail, FailLend) carries the decision out. A refused transition
// is a bug, logged (Env.CoreRefused).
func (d *Driver) decideFailedTransfer(ev handoff.TransferFailure) handoff.TransferFailedDecision {
	d.Env.Lock()
	dec, err := d.Table.FailTransfer(ev, d.Env.Decisions())
	d.Env.Unlock()
	d.Env.CoreRefused("FailTransfer "+ev.EntryID, err)
	return dec
}

// writeEndProof returns the Q-6 proofs of a source quarantine: a channel
// closed once the pending WRITE has ended and was released, for
// handoff.QuarantineSourceUntilWriteEnds (or the mutant's early free with
// a WRITE in flight); nil (no proof: for the life of the process) for
// handoff.QuarantineSourceForever, a failure the transport cannot explain.
func (d *Driver) writeEndProof(id string, pending *xfer.Request, action handoff.SourceAction) []<-chan struct{} {
	if pending == nil || action == handoff.QuarantineSourceForever {
		return nil
	}
	ended := make(chan struct{})
	go func() {
		<-pending.Done()
		if err := d.Agent.Release(pending); err != nil {
			d.Log.Error("Q-3 release of an ended WRITE failed; source kept", "entry", id, "err", err)
			return // the quarantine stays: no proof
		}
		close(ended)
	}()
	return []<-chan struct{}{ended}
}
