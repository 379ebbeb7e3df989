package props_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/baton-dev/baton/conformance/props"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/target/inprocess"
	"github.com/baton-dev/baton/engine/handoff"
	"pgregory.net/rapid"
)

// TestHandoffLifecycleInProcess runs the handoff property, lifecycle
// actions included (the baton.* test hooks, the executor's counters, the
// baseline), against one in-process reference engine with test hooks
// shared by every check.
func TestHandoffLifecycleInProcess(t *testing.T) {
	rapidDefaults(t, 60, 10, 15)
	tg, stop, err := inprocess.StartEPD(inprocess.Options{Preset: "tiny", CacheDir: t.TempDir(), TestHooks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("drain: %v (S-2, S-4)", err)
		}
	}()
	rapid.Check(t, props.Handoff(props.Shared(tg), props.Config{}))
}

// TestHandoffLifecycleFreshInProcess adds the actions that poison or shut
// down the producer (X-1, S-2): every check gets a fresh in-process engine
// with test hooks. A drain after a cleanup failure may report it (X-1 is
// sticky); any other drain error fails the check.
func TestHandoffLifecycleFreshInProcess(t *testing.T) {
	rapidDefaults(t, 30, 5, 15)
	dir := t.TempDir()
	n := 0
	mk := func() (target.Target, func() error, error) {
		n++
		tg, stop, err := inprocess.StartEPD(inprocess.Options{Preset: "tiny", CacheDir: dir + "/" + strconv.Itoa(n), TestHooks: true})
		if err != nil {
			return nil, nil, err
		}
		return tg, func() error {
			if err := stop(); err != nil && !errors.Is(err, handoff.ErrCleanupFailed) {
				return err
			}
			return nil
		}, nil
	}
	rapid.Check(t, props.Handoff(mk, props.Config{Shutdown: true}))
}
