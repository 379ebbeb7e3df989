package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance"
	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
)

// TestEPPD starts E (tcp backend), P, D and the aggregated baseline as real
// `baton serve` processes (launch.StartEPPD, tiny preset) and checks the
// case outcomes: every E+P+D case (L-1 decode preparation, L-2, B-1 E+P+D)
// passes, and every E+PD-only case is `not applicable` (the E+P+D copies
// of consumer cases, which need test hooks, are TestConsumerCasesOnEPPD's). Then it runs the
// whole suite through conformance.Run against the live target (nothing may
// fail), and shuts the processes down (S-4).
func TestEPPD(t *testing.T) {
	topo, err := launch.StartEPPD(context.Background(), launch.Options{Binary: batonBinary, Preset: "tiny", WorkDir: t.TempDir(), Backend: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := topo.Shutdown(context.Background(), 60*time.Second); err != nil {
			t.Errorf("S-4 shutdown: %v", err)
		}
	}()
	cfg := topo.Config()
	if !slices.Equal(cfg.Topologies, []string{target.TopologyEPPD}) {
		t.Fatalf("Config().Topologies = %v, want [E+P+D]", cfg.Topologies)
	}
	for _, r := range []target.Role{target.RoleProducer, target.RolePrefill, target.RoleDecode, target.RoleBaseline} {
		if cfg.Endpoints[r] == "" {
			t.Fatalf("Config().Endpoints lacks %s: %v", r, cfg.Endpoints)
		}
	}
	if _, ok := cfg.Endpoints[target.RoleConsumer]; ok {
		t.Fatalf("Config().Endpoints names a consumer in E+P+D: %v", cfg.Endpoints)
	}
	live := topo.Target()

	eppd := 0
	for _, c := range suite.Cases() {
		var want suite.Outcome
		switch {
		case c.Destructive, c.ViaPrefill:
			continue // conformance.Run runs it, last; TestConsumerCasesOnEPPD runs the copies with test hooks
		case slices.Contains(c.Labels, suite.LabelEPPD):
			want, eppd = suite.OutcomePassed, eppd+1
		case slices.Contains(c.Labels, suite.LabelEPD):
			want = suite.OutcomeNotApplicable
		default:
			continue
		}
		got, msgs := runCase(t, c, live)
		if got != want {
			t.Errorf("%s = %s, want %s:\n%v", c.Name, got, want, msgs)
		}
	}
	if eppd < 3 {
		t.Errorf("the registry has %d E+P+D cases, want at least 3 (L-1, L-2, B-1)", eppd)
	}

	conformance.Run(t, func() (target.Target, func(), error) { return live, func() {}, nil })
}

// runCase runs one case against tg with a recording TB and returns its
// outcome and messages.
func runCase(t *testing.T, c suite.Case, tg target.Target) (suite.Outcome, []string) {
	t.Helper()
	timeout := tg.Profile().CaseTimeout
	if timeout <= 0 {
		timeout = target.DefaultCaseTimeout
	}
	rec := runRecorded(c, tg, timeout)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return suite.OutcomeOf(rec.failed, rec.skipped, rec.messages...), rec.messages
}
