package nodes

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// The nodes' admission of a presented reference (the core decides:
// handoff.AdmitConsume on a consumer, handoff.AdmitTransfer on E) and what
// a reference that got an entry's data records. How a reference looks in
// each form (world.RefForm: presented, parsed, its tag) and the admission's
// per-world callbacks (World.Admit) stay in package world.

// consumerCheckRef is a consumer's admission of the presented reference:
// the core's handoff.AdmitConsume (engine/handoff/admit.go) decides it and
// its order (L-1 size, SU-4 malformed: every form parses, N-1 backend,
// then SU-5: the tag on the shared directory; over a transfer backend the
// producer verifies its own tag and the consumer checks the ids). The
// world supplies its form of the reference and the core's switches the
// mutant sets (handoff.Mutants: NoReferenceLimit, AnyBackend,
// UnsignedReferences, RejectedReferenceClaims, whose claim of a rejected
// reference's entry claimAndDiscard carries out).
func consumerCheckRef(w *world.World, c *world.ConsumerNode, rec *world.EntryRecord, f world.RefForm, h int32, rpc int64) error {
	a := &w.Admit
	if a.Adm.Accepted == nil {
		bindAdmission(a, w)
	}
	a.C, a.Rec, a.F, a.H, a.Rpc = c, rec, f, h, rpc
	adm := a.Adm
	adm.OpaqueBytes = f.OpaqueBytes()
	_, err := handoff.AdmitConsume(adm)
	a.C, a.Rec = nil, nil
	return err
}

// bindAdmission makes a's callbacks once per World (a consume made five
// closures and a slice each time, issue #16; a pooled World keeps them from
// run to run, world.runBufs) and sets its per-run fields once per run: the
// callbacks read the presented reference from a's fields, which
// consumerCheckRef sets before each admission, and the run's settings
// from w.
func bindAdmission(a *world.ConsumeAdmission, w *world.World) {
	if a.Adm.Parse != nil {
		a.Adm.Accepted, a.Adm.Mutants = accepted(w.Set.Backend), w.Decisions
		return
	}
	a.Adm = handoff.ConsumeAdmission{
		Parse:    func() (handoff.Reference, error) { return w.Parsed(a.Rec, a.F), nil },
		Accepts:  func(b string) bool { return b == w.Set.Backend },
		Accepted: accepted(w.Set.Backend),
		Transfer: func(b string) bool { return b == world.BackendTransfer },
		Verify:   func(handoff.Reference) error { return w.VerifyTag(a.Rec, a.F) },
		Mutants:  w.Decisions,
		Discard:  func(handoff.Reference, bool) { claimAndDiscard(w, a.C, a.Rec, a.H, a.Rpc, a.F) },
	}
}

// The consumer's list of accepted backends, one per backend, shared by
// every run (handoff reads Accepted for its N-1 message only).
var (
	acceptSharedDir = []string{world.BackendSharedDir}
	acceptTransfer  = []string{world.BackendTransfer}
)

// accepted is the list of the one backend b a consumer accepts.
func accepted(b string) []string {
	switch b {
	case world.BackendSharedDir:
		return acceptSharedDir
	case world.BackendTransfer:
		return acceptTransfer
	}
	return []string{b}
}

// claimAndDiscard carries out handoff.Mutants.RejectedReferenceClaims (the
// SU-4 mutant): it claims the named entry by rename and throws it away.
func claimAndDiscard(w *world.World, c *world.ConsumerNode, rec *world.EntryRecord, h int32, rpc int64, f world.RefForm) {
	if w.Set.Backend != world.BackendSharedDir {
		return
	}
	if w.Sd.Claim(w.Sd.Cons[c.Idx], c.Idx, rec, false) == world.ClaimWon {
		took(w, rec, fmt.Sprintf("discard/%d/%d", h, rpc), h, rpc, f)
		if w.Tracing {
			w.Notef("claimed and discarded %s for a rejected reference", world.Short(rec.Id))
		}
	}
}

// producerCheckRef is the producer's admission of a TransferEncoderCache
// call up to the claim: the core's handoff.AdmitTransfer decides it and
// its order (L-1, the backend: SU-4 for another backend sent to
// TransferEncoderCache, the SU-5 instance and tag, SU-2 expired), after
// the producer's health (S-2, X-1, Q-4: UNAVAILABLE), as the engine's
// TransferEncoderCache. The world has no consumer agent or targets to
// check. Each rejection is a pre-write one; an ErrSpentReference
// means the reference expired.
func producerCheckRef(w *world.World, rec *world.EntryRecord, f world.RefForm) error {
	a := &w.TransferAdmit
	if a.Adm.Parse == nil {
		bindTransferAdmission(a, w)
	}
	a.Rec, a.F = rec, f
	adm := a.Adm
	adm.OpaqueBytes, adm.Self, adm.NowUnixMs = f.OpaqueBytes(), w.Prod.InstanceID, w.Now
	_, err := handoff.AdmitTransfer(adm)
	a.Rec = nil
	return err
}

// bindTransferAdmission makes a's callbacks once per world: they read the
// producer (the current incarnation's health) from w and the presented
// reference from a's fields, which producerCheckRef sets before each
// admission.
func bindTransferAdmission(a *world.TransferAdmission, w *world.World) {
	a.Adm = handoff.TransferAdmission{
		Health: func() error { return w.Prod.Health.Admit() },
		Parse:  func() (handoff.Reference, error) { return w.Parsed(a.Rec, a.F), nil },
		Serves: []string{world.BackendTransfer},
		Verify: func(handoff.Reference) error { return w.VerifyTag(a.Rec, a.F) },
	}
}

// took records that a call's presented reference got rec's data (a won
// rename, a read, a landed WRITE): the ground truth the SU-1, SU-4 and SU-5
// checks judge.
func took(w *world.World, rec *world.EntryRecord, key string, h int32, rpc int64, f world.RefForm) {
	w.Ledger.AddConsumption(rec, key)
	w.Ledger.Touch(rec)
	w.Ledger.Takes = append(w.Ledger.Takes, world.Take{Rec: rec, Key: key, Call: world.CallKey{H: h, Rpc: rpc}, Form: f})
}
