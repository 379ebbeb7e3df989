package world

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// The answer checks judge, once each (a failure is shown once), what the nodes decided and answered
// (the logs of World and ledger), against the contract: like the
// conformance harness, they see the answer a call got and what really
// happened to the storage, never which driver made the decision.

// checkAnswers runs the answer checks, in this order (one step checker:
// each costs a length comparison when nothing new was logged).
func checkAnswers(w *World) (rule string, err error) {
	if err := checkFreshEntryIDs(w); err != nil {
		return "SU-6", err
	}
	// Called directly, not through a table of funcs: each is a length
	// comparison when nothing new was logged, and this runs every step.
	if rule, err := checkReferenceTakes(w); err != nil {
		return rule, err
	}
	if rule, err := checkUnpublished(w); err != nil {
		return rule, err
	}
	if rule, err := checkReceiveEnds(w); err != nil {
		return rule, err
	}
	if rule, err := checkTransferAnswers(w); err != nil {
		return rule, err
	}
	if rule, err := checkProbeAnswers(w); err != nil {
		return rule, err
	}
	if err := checkExpiryCollected(w); err != nil {
		return "X-2", err
	}
	return "", nil
}

// checkReferenceTakes: SU-4 and SU-5. A call whose reference was rejected
// (L-4, L-1, SU-4, N-1, SU-5) took nothing: no rename, read or WRITE of the
// entry it names happened for it (SU-4: "neither consumes nor releases
// anything"). A reference the producer did not seal (a forged tag, another
// backend) never reaches an entry's data (SU-5).
func checkReferenceTakes(w *World) (rule string, err error) {
	l := w.ledger
	for w.judged.takes < len(l.takes) {
		t := l.takes[w.judged.takes]
		w.judged.takes++
		if res, ok := l.rejected[t.call]; ok {
			return "SU-4", fmt.Errorf("entry %s was taken (%s) by client %d's call %d, which was answered %s: a rejected reference consumes nothing",
				short(t.rec.id), t.key, t.call.h, t.call.rpc, resNames[res])
		}
		if t.form != formIssued && t.form != formOversize {
			return "SU-5", fmt.Errorf("entry %s was taken (%s) by client %d's call %d with a %s reference, one its producer never sealed",
				short(t.rec.id), t.key, t.call.h, t.call.rpc, t.form)
		}
	}
	return "", nil
}

// checkReceiveEnds: and C-4 on the consumer's decision. A transfer
// receive frees its buffers only on success or a definite pre-write
// rejection (INVALID_ARGUMENT with the before-write trailer, Q-2); on a
// plain INVALID_ARGUMENT, any other failure or its own deadline,
// or its client's cancellation before the outcome is known (C-4), it keeps
// them (quarantined once the outcome is uncertain).
func checkReceiveEnds(w *World) (rule string, err error) {
	for w.judged.recvEnds < len(w.recvEnds) {
		e := w.recvEnds[w.judged.recvEnds]
		w.judged.recvEnds++
		if !e.freed || e.cause == resOK || e.cause == resBeforeWrite || e.cause == resUnavailableBeforeWrite {
			continue
		}
		switch e.cause {
		case resPlainInvalid:
			return "Q-2", fmt.Errorf("receive %s freed its buffers on INVALID_ARGUMENT without the before-write trailer (uncertain: quarantine them)", e.key)
		case causeCancelled:
			return "C-4", fmt.Errorf("receive %s freed its buffers when its client cancelled, before the transfer's outcome was known", e.key)
		case causeDeadline:
			return "Q-1", fmt.Errorf("receive %s freed its buffers when its deadline passed (outcome uncertain: quarantine them)", e.key)
		}
		return "Q-1", fmt.Errorf("receive %s freed its buffers on %s (outcome uncertain: quarantine them)", e.key, resNames[e.cause])
	}
	return "", nil
}

// checkTransferAnswers: Q-3. Once the producer took an entry out of its
// table for a transfer (the claim), its answer to that request is never
// INVALID_ARGUMENT: the WRITE may have landed.
func checkTransferAnswers(w *World) (rule string, err error) {
	for w.judged.upstream < len(w.upstream) {
		a := w.upstream[w.judged.upstream]
		w.judged.upstream++
		rq := &w.xreqs[a.recv-1]
		if !rq.claimed {
			continue
		}
		if answerCodes[a.res] == handoff.CodeInvalidArgument {
			return "Q-3", fmt.Errorf("producer answered %s to transfer %s after its entry left the table", resNames[a.res], rq.key)
		}
	}
	return "", nil
}

// checkUnpublished: a publish that ended before publication (encoder
// failure C-6, cancellation C-1, drain S-2, a failed write L-5) holds
// nothing: its entry and reserved bytes are gone from the producer's table
// by the end of the step that answered it.
func checkUnpublished(w *World) (rule string, err error) {
	l := w.ledger
	for w.judged.unpublished < len(l.unpublished) {
		u := l.unpublished[w.judged.unpublished]
		w.judged.unpublished++
		if st := w.prod.table.State(u.rec.id); st != 0 {
			return u.rule, fmt.Errorf("publish of client %d ended (%s) but its entry %s is still %v in the producer's table with its %d bytes",
				u.rec.h, u.why, short(u.rec.id), st, u.rec.payloadBytes)
		}
	}
	return "", nil
}

// checkProbeAnswers: SU-5, L-1, N-1, L-4 on the wire. A probe's answer is
// the one the contract gives it: a forged reference is never served; an
// oversize one is INVALID_ARGUMENT (L-1); one for an unlisted backend
// FAILED_PRECONDITION (N-1); a consume sent to E FAILED_PRECONDITION (L-4).
// A consumer that refused the call for its health (UNAVAILABLE) decided
// before looking at the reference (CONTRACT's order: health refusals
// first), so that probe is not judged on its reference; it took nothing
// either way (checkReferenceTakes).
func checkProbeAnswers(w *World) (rule string, err error) {
	for w.judged.probes < len(w.probeAnswers) {
		a := w.probeAnswers[w.judged.probes]
		w.judged.probes++
		if a.res == resUnavailable && w.ledger.healthRefused[callKey{a.h, a.rpc}] {
			continue
		}
		pr := probeRules[a.probe]
		if (pr.want == 0 && a.res == resOK) || (pr.want != 0 && a.res != pr.want) {
			want := "a rejection"
			if pr.want != 0 {
				want = resNames[pr.want]
			}
			return pr.rule, fmt.Errorf("client %d's %s for entry %s was answered %s, want %s", a.h, probeNames[a.probe], short(a.entry), resNames[a.res], want)
		}
	}
	return "", nil
}

// checkFreshEntryIDs: SU-6. Two publishes yield independent entries: a new
// entry never takes the id of an earlier one (whose reference would then
// address, consume or release the new one).
func checkFreshEntryIDs(w *World) error {
	if r := w.ledger.reused; len(r) > 0 {
		return fmt.Errorf("client %d's publish reserved entry %s, the id of client %d's earlier entry: the two publishes are not independent",
			r[0][1].h, short(r[0][1].id), r[0][0].h)
	}
	return nil
}

// checkExpiryCollected: X-2. An unconsumed entry is collected once its TTL
// passed: one collector period after its expiry it is no longer Published.
// Looked at once per collector period.
func checkExpiryCollected(w *World) error {
	if w.now < w.nextExpiryCheck || w.prod.stopped || w.nodes.prodDown {
		return nil // a crashed producer collects nothing; its entries die with it (producer_crash.go)
	}
	w.nextExpiryCheck = w.now + w.set.CollectPeriodMs
	for _, e := range w.ledger.all {
		if !e.published || w.now <= max(e.expiresMs, e.committedMs)+w.set.CollectPeriodMs || e.terminal() {
			continue
		}
		if w.ledger.entries[e.id] == e && w.prod.table.State(e.id) == handoff.EntryPublished {
			return fmt.Errorf("entry %s of client %d expired at tick %d and is still published %d ms later (collector period %d ms)",
				short(e.id), e.h, e.expiresMs, w.now-e.expiresMs, w.set.CollectPeriodMs)
		}
	}
	return nil
}
