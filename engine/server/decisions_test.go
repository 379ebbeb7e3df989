package server

import (
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
)

// TestDecisionsFromHooks: the engine runs the core's broken decisions
// (handoff.Mutants) that Hooks.Decisions names, and none with no hooks set
// (the contract's engine).
func TestDecisionsFromHooks(t *testing.T) {
	if got := (&Engine{}).decisions(); got != (handoff.Mutants{}) {
		t.Errorf("decisions() with no hooks = %+v, want none", got)
	}
	cases := []struct {
		name  string
		hooks Hooks
		want  handoff.Mutants
	}{
		{"Decisions", Hooks{Decisions: handoff.Mutants{ReleaseOnUncertain: true, InvalidArgumentAfterRemoval: true}},
			handoff.Mutants{ReleaseOnUncertain: true, InvalidArgumentAfterRemoval: true}},
	}
	for _, c := range cases {
		e := &Engine{cfg: Config{Hooks: c.hooks}}
		if got := e.decisions(); got != c.want {
			t.Errorf("%s: decisions() = %+v, want %+v", c.name, got, c.want)
		}
	}
}
