package server

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// A quarantine keeps memory a write (or a read of a source) may still
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
type quarantine struct {
	id     string // unique: "receive/<receive id>", "source/<entry>", "kv/<session>"
	reason string // the Health message and the log's
	// end runs once the proof arrived, with e.mu held: it drops the
	// quarantine's counts (the handoff table's, the store's). It must not
	// block or take e.mu.
	end func()
	// free runs after end, without e.mu: it frees what was kept
	// (deregisters, frees device memory). A failure there is X-1.
	free func() error
	// keep references the memory so the garbage collector keeps it for
	// as long as the quarantine lasts (never reused meanwhile).
	keep any
}

// enterQuarantine records q, turns Health NOT_READY, and, unless
// proofs is nil (the backend cannot prove anything: the quarantine lasts
// for the life of the process), ends it once every proof channel is
// closed. Call without e.mu.
func (e *Engine) enterQuarantine(q *quarantine, proofs []<-chan struct{}) {
	e.mu.Lock()
	e.quarantines[q.id] = q
	e.quarantinesEntered++
	e.health.Fail(handoff.CheckQuarantine, q.reason)
	e.mu.Unlock()
	e.healthChanged()
	if proofs == nil || !handoff.EndsOnProof(e.decisions()) { // the core decides (Q-6; its NeverEndQuarantine mutant)
		e.log.Warn("quarantine kept for the life of the process: the backend cannot prove that nothing touches it any more (CONTRACT Q-6)", "quarantine", q.id)
		return
	}
	if allClosed(proofs) {
		e.endQuarantine(q.id) // proved already: it ends before the answer leaves
		return
	}
	go func() {
		for _, p := range proofs {
			<-p
		}
		e.endQuarantine(q.id)
	}()
}

// allClosed reports whether every channel is closed, without waiting.
func allClosed(chs []<-chan struct{}) bool {
	for _, ch := range chs {
		select {
		case <-ch:
		default:
			return false
		}
	}
	return true
}

// endQuarantine ends quarantine id once its proof arrived: counts
// dropped, memory freed, Health READY if nothing else is quarantined.
func (e *Engine) endQuarantine(id string) {
	e.mu.Lock()
	q, ok := e.quarantines[id]
	if !ok {
		e.mu.Unlock()
		return
	}
	delete(e.quarantines, id)
	if q.end != nil {
		q.end()
	}
	left := len(e.quarantines)
	e.health.QuarantineEnded(left) // the core decides Health
	e.mu.Unlock()
	if q.free != nil {
		if err := q.free(); err != nil {
			e.failCleanup("free the memory of ended quarantine "+id, err)
		}
	}
	e.healthChanged()
	e.log.Info("Q-6 quarantine ended: the backend proved nothing can touch its memory any more", "quarantine", id, "quarantines_left", left)
}

// quarantineCounts returns the buffers and bytes of the quarantines that
// neither the consumer's receive table nor the producer's store counts
// (D's KV READ buffers). Call with e.mu held.
func (e *Engine) quarantineCounts() (int, int64) {
	n, b := 0, int64(0)
	for _, q := range e.quarantines {
		if kb, ok := q.keep.(kvQuarantine); ok {
			n++
			b += int64(len(kb.buf))
		}
	}
	return n, b
}

// kvQuarantine is what a KV READ quarantine keeps.
type kvQuarantine struct{ buf []byte }

// healthChanged tells the grpc.health.v1 service what Health now says
// (CONTRACT SE-5): SERVING only while READY, NOT_SERVING otherwise. Call
// without e.mu after every change of Health.
func (e *Engine) healthChanged() {
	e.healthMu.Lock() // serializes the updates: the last one says the latest state
	defer e.healthMu.Unlock()
	e.mu.Lock()
	st, _ := e.health.State()
	watch := e.onHealth
	e.mu.Unlock()
	if watch != nil {
		watch(st)
	}
}

// quarantineReason formats a Health reason for a quarantine.
func quarantineReason(rule, what string, cause any) string {
	return fmt.Sprintf("%s %s quarantined: %v", rule, what, cause)
}
