package handoff

import (
	"fmt"
	"slices"
	"sort"
)

// HealthState mirrors openengine.v1.HealthState (same numbers).
type HealthState int

// Health states (WIRE.md HealthState).
const (
	HealthStarting HealthState = 1
	HealthReady    HealthState = 2
	HealthDegraded HealthState = 3
	HealthDraining HealthState = 4
	HealthNotReady HealthState = 5
)

// HealthCheck is one named check with its state and reason.
type HealthCheck struct {
	Name    string
	State   HealthState
	Message string
}

// Health is an engine's health: READY, DRAINING after shutdown starts (S-2),
// and NOT_READY while anything is quarantined (Q-4, until Recover once Q-6
// ended every quarantine) and, sticky until restart, once a cleanup failed
// . Check names: "encoder_cache" (quarantine), "cleanup",
// "lifecycle" (starting, draining), plus notes that do not change the
// overall state ("cache_dir": the storage is full).
type Health struct {
	started  bool
	draining bool
	failures map[string]string      // check name -> first reason
	notes    map[string]HealthCheck // check name -> note (Note)
}

// NewHealth returns a Health in STARTING.
func NewHealth() *Health {
	return &Health{} // failures and notes are made at their first entry (most never get one)
}

// Started marks the engine as serving.
func (h *Health) Started() { h.started = true }

// StartDrain marks shutdown started (S-2).
func (h *Health) StartDrain() { h.draining = true }

// Draining reports whether shutdown started.
func (h *Health) Draining() bool { return h.draining }

// Fail records a sticky failure on check name; the first reason is kept.
func (h *Health) Fail(check, reason string) {
	if _, ok := h.failures[check]; !ok {
		if h.failures == nil {
			h.failures = map[string]string{}
		}
		h.failures[check] = reason
	}
}

// Recover ends the failure of check CheckQuarantine: call it once every
// quarantine of this side has ended (CONTRACT ). Every other
// failure (X-1's cleanup check, an executor divergence) is sticky until
// restart and is left as it is.
func (h *Health) Recover(check string) {
	if check == CheckQuarantine {
		delete(h.failures, check)
	}
}

// Note sets a check that reports a condition without changing the overall
// state (the shared directory out of space: "cache_dir" with
// HealthDegraded, while publishes answer RESOURCE_EXHAUSTED); the latest
// note of a check wins.
func (h *Health) Note(check string, state HealthState, message string) {
	if h.notes == nil {
		h.notes = map[string]HealthCheck{}
	}
	h.notes[check] = HealthCheck{Name: check, State: state, Message: message}
}

// ClearNote removes the note of check, if any.
func (h *Health) ClearNote(check string) { delete(h.notes, check) }

// Failure returns the first failure reason, sorted by check name, or "".
func (h *Health) Failure() string {
	names := make([]string, 0, len(h.failures))
	for n := range h.failures {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %s", names[0], h.failures[names[0]])
}

// State returns the overall state and the checks. NOT_READY wins over
// DRAINING, which wins over STARTING and READY.
func (h *Health) State() (HealthState, []HealthCheck) {
	var checks []HealthCheck
	// The names sorted on the stack for the usual few (slices.Sort keeps
	// them there; sort.Strings would move them to the heap).
	var nameBuf [4]string
	names := nameBuf[:0]
	for n := range h.failures {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		checks = append(checks, HealthCheck{Name: n, State: HealthNotReady, Message: h.failures[n]})
	}
	lifecycle := HealthCheck{Name: "lifecycle", State: HealthReady, Message: "serving"}
	switch {
	case h.draining:
		lifecycle = HealthCheck{Name: "lifecycle", State: HealthDraining, Message: "S-2 shutdown started"}
	case !h.started:
		lifecycle = HealthCheck{Name: "lifecycle", State: HealthStarting, Message: "starting"}
	}
	noteNames := nameBuf[:0] // names is done with
	for n := range h.notes {
		noteNames = append(noteNames, n)
	}
	slices.Sort(noteNames)
	for _, n := range noteNames {
		checks = append(checks, h.notes[n])
	}
	checks = append(checks, lifecycle)
	switch {
	case len(h.failures) > 0:
		return HealthNotReady, checks
	default:
		return lifecycle.State, checks
	}
}

// Admit decides whether a new handoff may start: ErrDraining (S-2) once
// shutdown started, ErrCleanupFailed or ErrQuarantined after a
// sticky failure. Text-only requests skip this check (Q-4 allows them) except
// for draining.
func (h *Health) Admit() error {
	if h.draining {
		return rejectS(ErrDraining, "S-2 shutting down", "", "", false)
	}
	if r, ok := h.failures[CheckCleanup]; ok {
		return rejectS(ErrCleanupFailed, "X-1 ", r, "", false)
	}
	if r, ok := h.failures[CheckQuarantine]; ok {
		return rejectS(ErrQuarantined, "Q-4 ", r, "", false)
	}
	return nil
}

// Check names used by the engine.
const (
	// CheckQuarantine is the encoder_cache check failed by quarantine.
	CheckQuarantine = "encoder_cache"
	// CheckCleanup is the check failed by a cleanup failure.
	CheckCleanup = "cleanup"
	// CheckCacheDir is the note set while the producer's storage is out of
	// space (ENOSPC): publishes answer RESOURCE_EXHAUSTED, the engine stays
	// READY (L-5).
	CheckCacheDir = "cache_dir"
)

// ShutdownStatus mirrors openengine.v1.ShutdownStatus.
type ShutdownStatus int

// Shutdown statuses (WIRE.md).
const (
	ShutdownAccepted            ShutdownStatus = 1
	ShutdownAlreadyShuttingDown ShutdownStatus = 2
)

// DecideShutdown applies CONTRACT S-1 to Shutdown(expected_instance_id):
// empty -> ErrShutdownIDMissing (INVALID_ARGUMENT); another id ->
// ErrShutdownIDMismatch (FAILED_PRECONDITION); a match -> ACCEPTED the first
// time, ALREADY_SHUTTING_DOWN after. It starts the drain on ACCEPTED.
func (h *Health) DecideShutdown(expected, instanceID string) (ShutdownStatus, error) {
	return h.DecideShutdownWith(expected, instanceID, Mutants{})
}

// DecideShutdownWith is DecideShutdown under the switches m: under
// ShutdownIgnoresID (breaks S-1) any non-empty expected_instance_id is
// taken for this instance's.
func (h *Health) DecideShutdownWith(expected, instanceID string, m Mutants) (ShutdownStatus, error) {
	if expected != "" && m.ShutdownIgnoresID {
		expected = instanceID // the S-1 mutant
	}
	if expected == "" {
		return 0, rejectf(ErrShutdownIDMissing, "S-1 Shutdown needs expected_instance_id")
	}
	if expected != instanceID {
		return 0, rejectf(ErrShutdownIDMismatch, "S-1 expected_instance_id %.40q is not this instance", expected)
	}
	if h.draining {
		return ShutdownAlreadyShuttingDown, nil
	}
	h.draining = true
	return ShutdownAccepted, nil
}
