package server

import (
	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/handoff"
)

// The quarantines (consumer.Quarantine: memory a write or a read may still
// touch, Q-1, Q-3, Q-4, Q-6) are kept in e.receives (engine/consumer),
// under e.mu; the engine turns Health and carries the end out.

// enterQuarantine records q, turns Health NOT_READY, and, unless
// proofs is nil (the backend cannot prove anything: the quarantine lasts
// for the life of the process), ends it once every proof channel is
// closed. Call without e.mu.
func (e *Engine) enterQuarantine(q *consumer.Quarantine, proofs []<-chan struct{}) {
	e.mu.Lock()
	e.receives.AddQuarantine(q)
	e.quarantinesEntered++
	e.health.Fail(handoff.CheckQuarantine, q.Reason)
	e.mu.Unlock()
	e.healthChanged()
	if proofs == nil || !handoff.EndsOnProof(e.decisions()) { // the core decides (Q-6; its NeverEndQuarantine mutant)
		e.log.Warn("quarantine kept for the life of the process: the backend cannot prove that nothing touches it any more (CONTRACT Q-6)", "quarantine", q.ID)
		return
	}
	consumer.OnProof(proofs, func() { e.endQuarantine(q.ID) }) // proved already: it ends before the answer leaves
}

// endQuarantine ends quarantine id once its proof arrived: counts
// dropped, memory freed, Health READY if nothing else is quarantined.
func (e *Engine) endQuarantine(id string) {
	e.mu.Lock()
	q, left := e.receives.RemoveQuarantine(id)
	if q == nil {
		e.mu.Unlock()
		return
	}
	e.health.QuarantineEnded(left) // the core decides Health
	e.mu.Unlock()
	if q.Free != nil {
		if err := q.Free(); err != nil {
			e.failCleanup("free the memory of ended quarantine "+id, err)
		}
	}
	e.healthChanged()
	e.log.Info("Q-6 quarantine ended: the backend proved nothing can touch its memory any more", "quarantine", id, "quarantines_left", left)
}

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
