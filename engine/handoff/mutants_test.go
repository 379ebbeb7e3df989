package handoff

import (
	"errors"
	"strings"
	"testing"
)

// TestAdmissionSwitches: each admission switch of Mutants breaks its one
// decision in AdmitConsume, AdmitRole and AdmitModality, and the zero
// value decides as the contract says.
func TestAdmissionSwitches(t *testing.T) {
	ref := Reference{Backend: "shared_dir", ProducerInstanceID: "0123abcd-0000-4000-8000-0123456789ab", EntryID: strings.Repeat("ab", 16), ExpiresUnixMs: 1000}
	errTag := rejectf(ErrForeignReference, "SU-5 tag")
	errParse := rejectf(ErrMalformedReference, "SU-4")
	type outcome struct {
		err       error
		discarded []bool // the malformed flag of each Discard
	}
	admit := func(m Mutants, bytes int, parseErr error, backend string, verifyErr error) outcome {
		var o outcome
		r := ref
		r.Backend = backend
		_, o.err = AdmitConsume(ConsumeAdmission{
			OpaqueBytes: bytes,
			Parse:       func() (Reference, error) { return r, parseErr },
			Accepts:     func(b string) bool { return b == "shared_dir" },
			Verify:      func(Reference) error { return verifyErr },
			Mutants:     m,
			Discard:     func(_ Reference, malformed bool) { o.discarded = append(o.discarded, malformed) },
		})
		return o
	}
	for _, c := range []struct {
		name          string
		m             Mutants
		bytes         int
		parseErr      error
		backend       string
		verifyErr     error
		want          error
		wantDiscarded int
		wantMalformed bool
	}{
		{name: "L-1 contract", bytes: MaxOpaqueStateBytes + 1, backend: "shared_dir", want: ErrTooLarge},
		{name: "L-1 NoReferenceLimit", m: Mutants{NoReferenceLimit: true}, bytes: MaxOpaqueStateBytes + 1, backend: "shared_dir"},
		{name: "N-1 contract", bytes: 200, backend: "other", want: ErrBackendNotAccepted},
		{name: "N-1 AnyBackend", m: Mutants{AnyBackend: true}, bytes: 200, backend: "other"},
		{name: "SU-5 contract", bytes: 200, backend: "shared_dir", verifyErr: errTag, want: ErrForeignReference},
		{name: "SU-5 UnsignedReferences", m: Mutants{UnsignedReferences: true}, bytes: 200, backend: "shared_dir", verifyErr: errTag},
		{name: "SU-4 contract, tag", bytes: 200, backend: "shared_dir", verifyErr: errTag, want: ErrForeignReference},
		{name: "SU-4 RejectedReferenceClaims, tag", m: Mutants{RejectedReferenceClaims: true}, bytes: 200, backend: "shared_dir", verifyErr: errTag, want: ErrForeignReference, wantDiscarded: 1},
		{name: "SU-4 RejectedReferenceClaims, malformed", m: Mutants{RejectedReferenceClaims: true}, bytes: 200, parseErr: errParse, backend: "shared_dir", want: ErrMalformedReference, wantDiscarded: 1, wantMalformed: true},
	} {
		o := admit(c.m, c.bytes, c.parseErr, c.backend, c.verifyErr)
		if (c.want == nil) != (o.err == nil) || (c.want != nil && !errors.Is(o.err, c.want)) {
			t.Errorf("%s: AdmitConsume = %v, want %v", c.name, o.err, c.want)
		}
		if len(o.discarded) != c.wantDiscarded || (c.wantDiscarded > 0 && o.discarded[0] != c.wantMalformed) {
			t.Errorf("%s: Discard calls %v, want %d (malformed %v)", c.name, o.discarded, c.wantDiscarded, c.wantMalformed)
		}
	}
	if st, _ := (Mutants{NoReferenceLimit: true}).ReadOpaqueState([]byte(" {} " + strings.Repeat(" ", MaxOpaqueStateBytes))); string(st) != "{}" {
		t.Errorf("ReadOpaqueState under NoReferenceLimit = %q, want the state without its whitespace", st)
	}
	if st, max := (Mutants{}).ReadOpaqueState([]byte(" {} ")); string(st) != " {} " || max != 0 {
		t.Errorf("ReadOpaqueState = %q, %d; want the bytes as they are and the contract's bound", st, max)
	}
	wrong := rejectf(ErrWrongRole, "L-4")
	if AdmitRole(wrong, Mutants{}) == nil || AdmitRole(wrong, Mutants{RoleUnchecked: true}) != nil {
		t.Error("AdmitRole: the contract rejects, the L-4 switch serves")
	}
	video := rejectf(ErrModalityUnsupported, "L-3")
	if AdmitModality(video, Mutants{}) == nil || AdmitModality(video, Mutants{VideoAsImage: true}) != nil {
		t.Error("AdmitModality: the contract rejects, the L-3 switch serves")
	}
}

// TestProducerSwitches: the producer's switches of Mutants (S-1, SU-3,
// SU-6, C-6, S-2, X-2) each break their one decision.
func TestProducerSwitches(t *testing.T) {
	h := NewHealth()
	if _, err := h.DecideShutdownWith("other", "me", Mutants{}); !errors.Is(err, ErrShutdownIDMismatch) {
		t.Errorf("DecideShutdownWith(other) = %v, want ErrShutdownIDMismatch", err)
	}
	if st, err := h.DecideShutdownWith("other", "me", Mutants{ShutdownIgnoresID: true}); err != nil || st != ShutdownAccepted {
		t.Errorf("S-1 switch: DecideShutdownWith(other) = %v, %v; want ACCEPTED", st, err)
	}
	if _, err := NewHealth().DecideShutdownWith("", "me", Mutants{ShutdownIgnoresID: true}); !errors.Is(err, ErrShutdownIDMissing) {
		t.Errorf("S-1 switch: an empty id = %v, still ErrShutdownIDMissing", err)
	}
	if AnswerRelease(ReleaseAlreadyFinished, Mutants{}) != ReleaseAlreadyFinished || AnswerRelease(ReleaseAlreadyFinished, Mutants{ReleaseAlwaysAborted: true}) != ReleaseAborted {
		t.Error("AnswerRelease: the contract answers ALREADY_FINISHED, the SU-3 switch ABORTED")
	}
	random := strings.Repeat("cd", 16)
	if EntryID(random, "h1,h2", Mutants{}) != random {
		t.Error("EntryID without switch is not the random id")
	}
	if a, b := EntryID(random, "h1,h2", Mutants{EntryIDFromContent: true}), EntryID(strings.Repeat("ef", 16), "h1,h2", Mutants{EntryIDFromContent: true}); a != b || len(a) != 32 {
		t.Errorf("SU-6 switch: ids %q, %q; want one 32-digit id for the same content", a, b)
	}

	id := strings.Repeat("ab", 16)
	for _, keep := range []bool{false, true} {
		tb := NewProducerTable(ProducerConfig{})
		if err := tb.Reserve(id, 10); err != nil {
			t.Fatal(err)
		}
		abandoned := tb.EncoderFailed(id, Mutants{KeepReservationOnEncoderFailure: keep})
		if abandoned == keep || (tb.Entries() == 0) == keep {
			t.Errorf("EncoderFailed(keep switch %v) = %v with %d entries", keep, abandoned, tb.Entries())
		}
	}

	tb := NewProducerTable(ProducerConfig{})
	if err := tb.Reserve(id, 10); err != nil {
		t.Fatal(err)
	}
	if err := tb.CommitPublish(id, 100); err != nil {
		t.Fatal(err)
	}
	if got := tb.Collect(200, Mutants{NoExpiryCollection: true}); len(got) != 0 {
		t.Errorf("X-2 switch: Collect expired %v", got)
	}
	if got := tb.Collect(200, Mutants{}); len(got) != 1 || got[0] != id {
		t.Errorf("Collect = %v, want [%s]", got, id)
	}
	// The entry is Removing: the drain may not end, but the S-2 switch
	// ends it, nothing being published.
	if tb.DrainDone(1, 0, Mutants{}) {
		t.Error("DrainDone with a removal pending")
	}
	if !tb.DrainDone(1, 0, Mutants{DrainBeforeCleanup: true}) {
		t.Error("S-2 switch: DrainDone waits for the removals")
	}
}
