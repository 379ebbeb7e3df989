package handoff

import (
	"errors"
	"testing"
)

// TestQuarantineEndsOnlyByEndQuarantine: an uncertain receive quarantines
// its buffers (counted per buffer, not per receive), refuses new receives
// until EndQuarantine, and the counters drop back to 0.
func TestQuarantineEndsOnlyByEndQuarantine(t *testing.T) {
	c := NewConsumerReceives(ConsumerConfig{})
	step := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	step(c.Preflight("r1", 300))
	step(c.SetBuffers("r1", 3))
	step(c.Registered("r1"))
	step(c.Requested("r1"))
	step(c.Uncertain("r1"))
	if n, b := c.Quarantine(); n != 3 || b != 300 {
		t.Errorf("Quarantine() = %d buffers, %d bytes; want 3, 300 (buffers, not receives)", n, b)
	}
	if !c.Quarantined("r1") {
		t.Error("Quarantined(r1) = false after Uncertain")
	}
	if err := c.Preflight("r2", 10); !errors.Is(err, ErrQuarantined) {
		t.Errorf("Preflight on a quarantined consumer = %v; want ErrQuarantined (Q-4)", err)
	}
	step(c.CheckInvariants())
	step(c.EndQuarantine("r1"))
	if n, b := c.Quarantine(); n != 0 || b != 0 {
		t.Errorf("Quarantine() after EndQuarantine = %d, %d; want 0, 0", n, b)
	}
	if err := c.EndQuarantine("r1"); err == nil {
		t.Error("a second EndQuarantine succeeded")
	}
	step(c.Preflight("r2", 10))
	step(c.CheckInvariants())
	if err := c.SetBuffers("r2", 0); err == nil {
		t.Error("SetBuffers(0) succeeded")
	}
	step(c.Registered("r2"))
	if err := c.SetBuffers("r2", 2); err == nil {
		t.Error("SetBuffers after REGISTERED succeeded")
	}
	// A receive that sent nothing ends REJECTED: nothing to quarantine.
	step(c.Uncertain("r2"))
	if n, _ := c.Quarantine(); n != 0 || c.Quarantined("r2") {
		t.Errorf("Uncertain before Requested quarantined %d buffers; want none", n)
	}
}

// TestHealthRecoverEndsOnlyTheQuarantine: Recover clears the quarantine
// check but never X-1's cleanup check; notes never change the
// overall state.
func TestHealthRecoverEndsOnlyTheQuarantine(t *testing.T) {
	h := NewHealth()
	h.Started()
	h.Fail(CheckQuarantine, "q")
	if st, _ := h.State(); st != HealthNotReady {
		t.Fatalf("state %v after a quarantine, want NOT_READY", st)
	}
	h.Recover(CheckQuarantine)
	if st, _ := h.State(); st != HealthReady {
		t.Errorf("state %v after Recover, want READY", st)
	}
	h.Note(CheckCacheDir, HealthDegraded, "ENOSPC")
	st, checks := h.State()
	if st != HealthReady {
		t.Errorf("state %v with a note, want READY", st)
	}
	found := false
	for _, c := range checks {
		found = found || (c.Name == CheckCacheDir && c.State == HealthDegraded && c.Message == "ENOSPC")
	}
	if !found {
		t.Errorf("checks %v lack the cache_dir note", checks)
	}
	h.ClearNote(CheckCacheDir)
	h.Fail(CheckCleanup, "x")
	h.Recover(CheckCleanup)
	if err := h.Admit(); !errors.Is(err, ErrCleanupFailed) {
		t.Errorf("Admit after Recover(cleanup) = %v; want X-1 still failing", err)
	}
}

// TestQuarantineEndsOnProof: a quarantine ends on its Q-6 proof
// (EndsOnProof) except under the NeverEndQuarantine mutant, and Health
// recovers only once no quarantine of the side is left (QuarantineEnded),
// never over X-1's cleanup check.
func TestQuarantineEndsOnProof(t *testing.T) {
	if !EndsOnProof(Mutants{}) {
		t.Error("EndsOnProof of the contract's core = false")
	}
	if EndsOnProof(Mutants{NeverEndQuarantine: true}) {
		t.Error("EndsOnProof under NeverEndQuarantine = true")
	}
	h := NewHealth()
	h.Started()
	h.Fail(CheckQuarantine, "q1")
	if h.QuarantineEnded(1) {
		t.Error("QuarantineEnded(1 left) recovered")
	}
	if st, _ := h.State(); st != HealthNotReady {
		t.Errorf("state %v with a quarantine left, want NOT_READY", st)
	}
	if !h.QuarantineEnded(0) {
		t.Error("QuarantineEnded(0 left) did not recover")
	}
	if st, _ := h.State(); st != HealthReady {
		t.Errorf("state %v once no quarantine is left, want READY", st)
	}
	h.Fail(CheckQuarantine, "q2")
	h.Fail(CheckCleanup, "x")
	h.QuarantineEnded(0)
	if err := h.Admit(); !errors.Is(err, ErrCleanupFailed) {
		t.Errorf("Admit after the last quarantine ended with a failed cleanup = %v; want X-1", err)
	}
}
