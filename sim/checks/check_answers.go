package checks

import (
	"fmt"
	"math"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// The answer checks judge, once each (a failure is shown once), what the nodes decided and answered
// (the logs of World and ledger), against the contract: like the
// conformance harness, they see the answer a call got and what really
// happened to the storage, never which driver made the decision.

// checkAnswers runs the answer checks, in this order (one step checker:
// each costs a length comparison when nothing new was logged).
func checkAnswers(w *world.World) (rule string, err error) {
	if err := checkFreshEntryIDs(w); err != nil {
		return "SU-6", err
	}
	// Called directly, not through a table of funcs, and only when their
	// log holds something not judged yet: this runs every step, and most
	// steps log nothing (the length comparison inline, not a call).
	if w.Judged.Takes < len(w.Ledger.Takes) { // something new to judge
		if rule, err := checkReferenceTakes(w); err != nil {
			return rule, err
		}
	}
	if w.Judged.Unpublished < len(w.Ledger.Unpublished) { // something new to judge
		if rule, err := checkUnpublished(w); err != nil {
			return rule, err
		}
	}
	if w.Judged.RecvEnds < len(w.RecvEnds) { // something new to judge
		if rule, err := checkReceiveEnds(w); err != nil {
			return rule, err
		}
	}
	if w.Judged.Upstream < len(w.Upstream) { // something new to judge
		if rule, err := checkTransferAnswers(w); err != nil {
			return rule, err
		}
	}
	if w.Judged.Probes < len(w.ProbeAnswers) { // something new to judge
		if rule, err := checkProbeAnswers(w); err != nil {
			return rule, err
		}
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
func checkReferenceTakes(w *world.World) (rule string, err error) {
	l := w.Ledger
	for w.Judged.Takes < len(l.Takes) {
		t := l.Takes[w.Judged.Takes]
		w.Judged.Takes++
		if res, ok := l.Rejected[t.Call]; ok {
			return "SU-4", fmt.Errorf("entry %s was taken (%s) by client %d's call %d, which was answered %s: a rejected reference consumes nothing",
				world.Short(t.Rec.Id), t.Key, t.Call.H, t.Call.Rpc, world.ResNames[res])
		}
		if t.Form != world.FormIssued && t.Form != world.FormOversize {
			return "SU-5", fmt.Errorf("entry %s was taken (%s) by client %d's call %d with a %s reference, one its producer never sealed",
				world.Short(t.Rec.Id), t.Key, t.Call.H, t.Call.Rpc, t.Form)
		}
	}
	return "", nil
}

// checkReceiveEnds: and C-4 on the consumer's decision. A transfer
// receive frees its buffers only on success or a definite pre-write
// rejection (INVALID_ARGUMENT with the before-write trailer, Q-2); on a
// plain INVALID_ARGUMENT, any other failure or its own deadline,
// or its client's cancellation before the outcome is known (C-4), it keeps
// them (quarantined once the outcome is uncertain). SE-4: a client's
// cancellation alone never quarantines them (it never reaches the
// transfer call, handoff.CancelReachesCall), so a client that abandons
// its transfers never takes the consumer out of READY.
func checkReceiveEnds(w *world.World) (rule string, err error) {
	for w.Judged.RecvEnds < len(w.RecvEnds) {
		e := w.RecvEnds[w.Judged.RecvEnds]
		w.Judged.RecvEnds++
		if !e.Freed && e.Cause == world.CauseCancelled {
			return "SE-4", fmt.Errorf("receive %s quarantined its buffers when its client cancelled: a client's cancel never reaches the transfer call (the consumer waits for the outcome, C-4), so abandoned transfers never take a consumer out of READY", e.Key)
		}
		if !e.Freed || e.Cause == world.ResOK || e.Cause == world.ResBeforeWrite || e.Cause == world.ResUnavailableBeforeWrite {
			continue
		}
		switch e.Cause {
		case world.ResPlainInvalid:
			return "Q-2", fmt.Errorf("receive %s freed its buffers on INVALID_ARGUMENT without the before-write trailer (uncertain: quarantine them)", e.Key)
		case world.CauseCancelled:
			return "C-4", fmt.Errorf("receive %s freed its buffers when its client cancelled, before the transfer's outcome was known", e.Key)
		case world.CauseDeadline:
			return "Q-1", fmt.Errorf("receive %s freed its buffers when its deadline passed (outcome uncertain: quarantine them)", e.Key)
		}
		return "Q-1", fmt.Errorf("receive %s freed its buffers on %s (outcome uncertain: quarantine them)", e.Key, world.ResNames[e.Cause])
	}
	return "", nil
}

// checkTransferAnswers: Q-3. Once the producer took an entry out of its
// table for a transfer (the claim), its answer to that request is never
// INVALID_ARGUMENT: the WRITE may have landed.
func checkTransferAnswers(w *world.World) (rule string, err error) {
	for w.Judged.Upstream < len(w.Upstream) {
		a := w.Upstream[w.Judged.Upstream]
		w.Judged.Upstream++
		rq := &w.Xreqs[a.Recv-1]
		if !rq.Claimed {
			continue
		}
		if world.AnswerCodes[a.Res] == handoff.CodeInvalidArgument {
			return "Q-3", fmt.Errorf("producer answered %s to transfer %s after its entry left the table", world.ResNames[a.Res], rq.Key)
		}
	}
	return "", nil
}

// checkUnpublished: a publish that ended before publication (encoder
// failure C-6, cancellation C-1, drain S-2, a failed write L-5) holds
// nothing: its entry and reserved bytes are gone from the producer's table
// by the end of the step that answered it.
func checkUnpublished(w *world.World) (rule string, err error) {
	l := w.Ledger
	for w.Judged.Unpublished < len(l.Unpublished) {
		u := l.Unpublished[w.Judged.Unpublished]
		w.Judged.Unpublished++
		if st := w.Prod.Table.State(u.Rec.Id); st != 0 {
			return u.Rule, fmt.Errorf("publish of client %d ended (%s) but its entry %s is still %v in the producer's table with its %d bytes",
				u.Rec.H, u.Why, world.Short(u.Rec.Id), st, u.Rec.PayloadBytes)
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
func checkProbeAnswers(w *world.World) (rule string, err error) {
	for w.Judged.Probes < len(w.ProbeAnswers) {
		a := w.ProbeAnswers[w.Judged.Probes]
		w.Judged.Probes++
		if a.Res == world.ResUnavailable && w.Ledger.HealthRefused[world.CallKey{H: a.H, Rpc: a.Rpc}] {
			continue
		}
		pr := world.ProbeRules[a.Probe]
		if (pr.Want == 0 && a.Res == world.ResOK) || (pr.Want != 0 && a.Res != pr.Want) {
			want := "a rejection"
			if pr.Want != 0 {
				want = world.ResNames[pr.Want]
			}
			return pr.Rule, fmt.Errorf("client %d's %s for entry %s was answered %s, want %s", a.H, world.ProbeNames[a.Probe], world.Short(a.Entry), world.ResNames[a.Res], want)
		}
	}
	return "", nil
}

// checkFreshEntryIDs: SU-6. Two publishes yield independent entries: a new
// entry never takes the id of an earlier one (whose reference would then
// address, consume or release the new one).
func checkFreshEntryIDs(w *world.World) error {
	if len(w.Ledger.Reused) == 0 {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkFreshEntryIDsScan(w)
}

// checkFreshEntryIDsScan is checkFreshEntryIDs's scan, once there is something to look at.
func checkFreshEntryIDsScan(w *world.World) error {
	if r := w.Ledger.Reused; len(r) > 0 {
		return fmt.Errorf("client %d's publish reserved entry %s, the id of client %d's earlier entry: the two publishes are not independent",
			r[0][1].H, world.Short(r[0][1].Id), r[0][0].H)
	}
	return nil
}

// checkExpiryCollected: X-2. An unconsumed entry is collected once its TTL
// passed: one collector period after its expiry it is no longer Published.
// Looked at once per collector period.
func checkExpiryCollected(w *world.World) error {
	if w.Now < w.NextExpiryCheck {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkExpiryCollectedScan(w)
}

// checkExpiryCollectedScan is checkExpiryCollected's scan, once there is something to look at.
func checkExpiryCollectedScan(w *world.World) error {
	if w.Now < w.NextExpiryCheck || w.Prod.Stopped || w.Nodes.ProdDown {
		return nil // a crashed producer collects nothing; its entries die with it (sim/nodes/producer_crash.go)
	}
	w.NextExpiryCheck = w.Now + w.Set.CollectPeriodMs
	all, j := w.Ledger.All, &w.Judged
	// The loop below finds an entry only if it is published, not ended and
	// overdue. Since the last scan, with no publication (Ledger.Publications
	// unchanged), the published entries not ended are a subset of those it
	// saw (Published and the Terminal fields are only ever set; ExpiresMs
	// and CommittedMs only at publication), each overdue only after
	// ExpiryDue: while Now <= ExpiryDue the loop would find nothing.
	if w.Ledger.Publications == j.ExpiryPubs && w.Now <= j.ExpiryDue {
		return nil
	}
	// The entries before Judged.Ended are terminal, which they stay (an
	// entry's Terminal fields are only ever set): the loop would skip them.
	for j.Ended < len(all) && all[j.Ended].Terminal() {
		j.Ended++
	}
	j.ExpiryPubs, j.ExpiryDue = w.Ledger.Publications, math.MaxInt64
	for _, e := range all[j.Ended:] {
		if !e.Published || e.Terminal() {
			continue
		}
		due := max(e.ExpiresMs, e.CommittedMs) + w.Set.CollectPeriodMs
		j.ExpiryDue = min(j.ExpiryDue, due) // one not flagged below stays a candidate
		if w.Now <= due {
			continue
		}
		if w.Ledger.Entries[e.Id] == e && w.Prod.Table.State(e.Id) == handoff.EntryPublished {
			j.ExpiryDue = math.MinInt64 // the loop stopped early: its minimum is partial
			return fmt.Errorf("entry %s of client %d expired at tick %d and is still published %d ms later (collector period %d ms)",
				world.Short(e.Id), e.H, e.ExpiresMs, w.Now-e.ExpiresMs, w.Set.CollectPeriodMs)
		}
	}
	return nil
}
