package mutants

import (
	"reflect"
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/contenthash"
	"github.com/baton-dev/baton/engine/executor"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/server"
	"github.com/baton-dev/baton/sim"
	"github.com/baton-dev/baton/sim/executorworld"
)

// CoreSwitches names the handoff.Mutants switches m sets ("" for none).
func coreSwitches(m handoff.Mutants) string {
	var on []string
	v := reflect.ValueOf(m)
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Bool() {
			on = append(on, v.Type().Field(i).Name)
		}
	}
	return strings.Join(on, "+")
}

// TestSameCoreDecisionAsSimulator: a conformance mutant whose broken
// decision lives in the lifecycle core (its Hooks set handoff.Mutants
// switches) names a simulator mutant (Mutant.Sim) that sets exactly the
// same switches, so the kill table's three columns run one mutant, not a
// counterpart (issue #16, one mutant vocabulary); and a simulator mutant
// that sets core switches is named by such a conformance mutant.
func TestSameCoreDecisionAsSimulator(t *testing.T) {
	named := map[sim.Mutant]bool{}
	shared := 0
	for _, m := range append(All(), InProcess()...) {
		var h server.Hooks
		m.Apply(&h)
		core := h.CoreDecisions()
		if core == (handoff.Mutants{}) {
			continue
		}
		if m.Sim == "" {
			t.Logf("%s: core switch %s, no simulator mutant (the simulator cannot reach the decision)", m.Name, coreSwitches(core))
			continue
		}
		sm, err := sim.ParseMutant(m.Sim)
		if err != nil {
			t.Errorf("%s: Sim %q: %v", m.Name, m.Sim, err)
			continue
		}
		named[sm] = true
		if got := sm.Decisions(); got != core {
			t.Errorf("%s sets core switches %q; its simulator mutant %s sets %q: not the same broken decision", m.Name, coreSwitches(core), sm, coreSwitches(got))
			continue
		}
		shared++
		t.Logf("%s = sim %s: handoff.Mutants.%s", m.Name, sm, coreSwitches(core))
	}
	for sm := range sim.Mutants {
		if sm.Decisions() != (handoff.Mutants{}) && !named[sm] {
			t.Errorf("simulator mutant %s sets core switches %s but no conformance mutant with the same switches names it", sm, coreSwitches(sm.Decisions()))
		}
	}
	if shared == 0 {
		t.Fatal("no conformance mutant shares a core switch with the simulator")
	}
}

// TestSameBackendAndExecutorSwitchAsSimulator: a conformance mutant that
// sets a shared-directory backend switch (Hooks.SharedDir) or a content
// hash switch (Hooks.ContentHashing) or a model switch (Hooks.Model) names
// a simulator mutant that sets the same (sim.Mutant.SharedDirDecisions,
// ContentHashDecisions, ModelDecisions), and
// one that breaks the executor core (Hooks.ExecutorMutation) names an
// executor-world mutation whose Core is the same; every kill-table row's
// SimKinship says which it is (issue #16, one mutant vocabulary).
func TestSameBackendAndExecutorSwitchAsSimulator(t *testing.T) {
	named := map[sim.Mutant]bool{}
	for _, m := range append(All(), InProcess()...) {
		var h server.Hooks
		m.Apply(&h)
		if h.SharedDir != (shareddir.Mutants{}) {
			sm, err := sim.ParseMutant(m.Sim)
			if err != nil || m.Sim == "" {
				t.Errorf("%s sets shareddir switches %+v but names no simulator mutant (%q: %v)", m.Name, h.SharedDir, m.Sim, err)
				continue
			}
			named[sm] = true
			if got := sm.SharedDirDecisions(); got != h.SharedDir {
				t.Errorf("%s sets shareddir switches %+v; its simulator mutant %s sets %+v", m.Name, h.SharedDir, sm, got)
			}
		}
		if h.ContentHashing != (contenthash.Mutants{}) {
			sm, err := sim.ParseMutant(m.Sim)
			if err != nil || m.Sim == "" {
				t.Errorf("%s sets contenthash switches %+v but names no simulator mutant (%q: %v)", m.Name, h.ContentHashing, m.Sim, err)
				continue
			}
			named[sm] = true
			if got := sm.ContentHashDecisions(); got != h.ContentHashing {
				t.Errorf("%s sets contenthash switches %+v; its simulator mutant %s sets %+v", m.Name, h.ContentHashing, sm, got)
			}
		}
		if h.Model != (lm.Mutants{}) {
			sm, err := sim.ParseMutant(m.Sim)
			if err != nil || m.Sim == "" {
				t.Errorf("%s sets lm switches %+v but names no simulator mutant (%q: %v)", m.Name, h.Model, m.Sim, err)
				continue
			}
			named[sm] = true
			if got := sm.ModelDecisions(); got != h.Model {
				t.Errorf("%s sets lm switches %+v; its simulator mutant %s sets %+v", m.Name, h.Model, sm, got)
			}
		}
		if h.ExecutorMutation != (executor.Mutation{}) {
			name, ok := strings.CutPrefix(m.Sim, "executor:")
			mut, known := executorworld.Mutations()[name]
			if !ok || !known {
				t.Errorf("%s breaks the executor core (%+v) but names no executor-world mutation (%q)", m.Name, h.ExecutorMutation, m.Sim)
				continue
			}
			if mut.Core != h.ExecutorMutation {
				t.Errorf("%s breaks the executor core with %+v; its executor-world mutation %s is %+v", m.Name, h.ExecutorMutation, name, mut)
			}
		}
		if k := m.SimKinship(); k != "" {
			t.Logf("%-40s sim %-36s %s", m.Name, m.Sim, k)
		}
	}
	for sm := range sim.Mutants {
		if (sm.SharedDirDecisions() != (shareddir.Mutants{}) || sm.ContentHashDecisions() != (contenthash.Mutants{}) || sm.ModelDecisions() != (lm.Mutants{})) && !named[sm] {
			t.Errorf("simulator mutant %s sets shareddir, contenthash or lm switches but no conformance mutant with the same switches names it", sm)
		}
	}
}
