package consumer

import "fmt"

// A Quarantine keeps memory a write (or a read of a source) may still
// touch: a consumer's receive buffers after an uncertain transfer, a
// producer's source after a WRITE that failed past the claim, D's
// KV receive buffer after a READ still in flight at its deadline. While
// any quarantine lasts the engine reports Health NOT_READY (check
// encoder_cache) and refuses new handoffs. A quarantine ends only
// when the backend proves that nothing can touch the memory any more
// (CONTRACT Q-6), never because time passed:
//
//   - tcp receive: the registration is revoked with the transfer agent
//     (xfer Agent.Revoke: writes to it refused from then on) and every
//     connection that carried the transfer has closed: the agent's inbound
//     connections that carried a write into the buffers, and the control
//     connections to the producer that may have carried the request;
//   - tcp source: the producer's own WRITE request has ended and was
//     released (nothing reads the source any more);
//   - KV READ: the READ request has ended and was released;
//   - cuda_ipc receive: the control connections that may have carried the
//     request have closed (the producer never writes a cuda_ipc consumer's
//     memory; a lost loan is given back with Abort);
//   - a failure the backend cannot explain (the baton.transfer_fail test
//     hook, a device that cannot synchronize) keeps it for the life of the
//     process.
//
// Then the memory is freed, the quarantine counters drop and Health
// returns to READY once nothing is quarantined and nothing else holds it
// NOT_READY (X-1 stays until restart).
//
// The producer's and D's quarantines live here too: Health counts them
// all, and one set keeps the count.
type Quarantine struct {
	// ID is unique: "receive/<receive id>", "source/<entry>", "kv/<session>/<random>".
	ID string
	// Reason is the Health message and the log's.
	Reason string
	// End runs once the proof arrived, with the caller's lock held
	// (RemoveQuarantine): it drops the quarantine's counts (the receives
	// table's, the producer store's). It must not block or take the lock.
	End func()
	// Free runs after End, without the lock: it frees what was kept
	// (deregisters, frees device memory). A failure there is X-1.
	Free func() error
	// Keep references the memory so the garbage collector keeps it for
	// as long as the quarantine lasts (never reused meanwhile).
	Keep any
	// UncountedBytes are the bytes of memory that neither the receives
	// table nor the producer's store counts (D's KV READ buffer), counted
	// by UncountedQuarantine; 0 for the others.
	UncountedBytes int64
}

// AddQuarantine records q, replacing any quarantine of the same ID. The
// caller turns Health NOT_READY (handoff.Health.Fail, Q-4) under the same
// lock.
func (r *Receives) AddQuarantine(q *Quarantine) {
	r.quarantines[q.ID] = q
}

// RemoveQuarantine ends quarantine id once its proof arrived: it
// forgets it, runs its End, and returns it with how many quarantines are
// left (for handoff.Health.QuarantineEnded); nil when there is none of
// that id (ended already). The caller then runs q.Free without the lock.
func (r *Receives) RemoveQuarantine(id string) (q *Quarantine, left int) {
	q, ok := r.quarantines[id]
	if !ok {
		return nil, len(r.quarantines)
	}
	delete(r.quarantines, id)
	if q.End != nil {
		q.End()
	}
	return q, len(r.quarantines)
}

// UncountedQuarantine returns the buffers and bytes of the quarantines
// that neither the consumer's receive table nor the producer's store
// counts (D's KV READ buffers), for the observables
// encoder.quarantine.buffers and encoder.quarantine.bytes.
func (r *Receives) UncountedQuarantine() (int, int64) {
	n, b := 0, int64(0)
	for _, q := range r.quarantines {
		if q.UncountedBytes > 0 {
			n++
			b += q.UncountedBytes
		}
	}
	return n, b
}

// OnProof runs end once every proof channel is closed: at once, on
// the caller's goroutine, when all are closed already (the quarantine ends
// before the answer leaves), otherwise on a goroutine of its own that
// waits for them. Call it without the lock; end takes it. A quarantine
// with no proof (nil) lasts for the life of the process: do not call
// OnProof for it.
func OnProof(proofs []<-chan struct{}, end func()) {
	if AllClosed(proofs) {
		end()
		return
	}
	go func() {
		for _, p := range proofs {
			<-p
		}
		end()
	}()
}

// AllClosed reports whether every channel is closed, without waiting.
func AllClosed(chs []<-chan struct{}) bool {
	for _, ch := range chs {
		select {
		case <-ch:
		default:
			return false
		}
	}
	return true
}

// QuarantineReason formats a quarantine's Health reason (Quarantine.Reason,
// handoff.HealthChange.Reason): "<rule> <what> quarantined: <cause>".
func QuarantineReason(rule, what string, cause any) string {
	return fmt.Sprintf("%s %s quarantined: %v", rule, what, cause)
}
