package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/mutants"
	"github.com/baton-dev/baton/conformance/suite"
)

// TestConsumerCasesOnEPPD runs the E+P+D copy of every consumer case (P
// consumes the reference, D decodes P's KV session) at every level against
// E+P+D over tcp with the fault proxy, as real processes: each passes;
// so do the SE-4 cases of E alone, which name no topology.
func TestConsumerCasesOnEPPD(t *testing.T) {
	topo, err := launch.StartEPPD(context.Background(), launch.Options{Binary: batonBinary, Preset: "tiny", WorkDir: t.TempDir(),
		Backend: "tcp", FaultProxy: true, TestHooks: true, ProducerQuotaBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	live := topo.Target()
	ran := runExpectingPass(t, live, func(c suite.Case) bool { return c.ViaPrefill })
	if ran < 40 {
		t.Errorf("ran %d E+P+D copies of consumer cases; want at least 40", ran)
	}
	// The SE-4 cases of E alone (decode budget, JPEG scans) name no
	// topology: an E+P+D-only target runs them on its E too.
	if ran := runExpectingPass(t, live, func(c suite.Case) bool { return c.Rule == "SE-4" && c.Needs.Topology == "" }); ran != 2 {
		t.Errorf("ran %d SE-4 cases of E alone on E+P+D; want 2 (decode budget, JPEG scans)", ran)
	}
	if err := topo.Shutdown(context.Background(), 60*time.Second); err != nil {
		t.Errorf("S-4 shutdown: %v", err)
	}
}

// TestEPPDCopiesKillConsumerMutants starts E+P+D with a consumer-side
// mutant on every process and runs the E+P+D copies of the cases of its
// rule: one must fail, so the copies check P, not only pass on it.
func TestEPPDCopiesKillConsumerMutants(t *testing.T) {
	for _, name := range []string{"q1-release-on-any-error", "c4-free-on-cancel", "b2-text-keyed-cache", "n1-any-backend"} {
		t.Run(name, func(t *testing.T) {
			m, err := mutants.ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			topo, err := launch.StartEPPD(context.Background(), launch.Options{Binary: batonBinary, Preset: "tiny", WorkDir: t.TempDir(),
				Backend: "tcp", FaultProxy: true, TestHooks: true, Mutant: name, ProducerQuotaBytes: 32 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer topo.Shutdown(context.Background(), 30*time.Second)
			live := topo.Target()
			var failed []string
			for _, c := range suite.CasesForRule(m.Rule) {
				if !c.ViaPrefill || c.UnderFaults {
					continue
				}
				if rec := runRecorded(c, live, 90*time.Second); rec.Failed() {
					failed = append(failed, c.Name)
				}
			}
			if len(failed) == 0 {
				t.Errorf("mutant %s (%s: %s) survived the E+P+D copies of the %s cases", name, m.Rule, m.Breaks, m.Rule)
			} else {
				t.Logf("mutant %s KILLED on E+P+D by: %s", name, strings.Join(failed, " | "))
			}
		})
	}
}
