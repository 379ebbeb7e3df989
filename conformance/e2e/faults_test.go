package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance"
	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
)

// TestFaultsLevelTCP runs every case, the Faults level included, against
// E+PD on the tcp backend with the fault proxy between consumer and
// producer, as real processes.
func TestFaultsLevelTCP(t *testing.T) {
	topo, err := launch.StartEPD(context.Background(), launch.Options{Binary: batonBinary, Preset: "tiny", WorkDir: t.TempDir(),
		Backend: "tcp", FaultProxy: true, TestHooks: true, ProducerQuotaBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	live := topo.Target()
	conformance.Run(t, func() (target.Target, func(), error) { return live, func() {}, nil })
	if err := topo.Shutdown(context.Background(), 60*time.Second); err != nil {
		t.Errorf("S-4 shutdown: %v", err)
	}
}

// TestQ6CaseKillsTheProducer: the Q-6 case, against real processes whose
// harness can kill them (launch's live target, a target.Crasher), ends the
// producer with SIGKILL, as CONTRACT Q-6's "killed producer" says, not with
// a drain: the first producer's log shows neither an accepted Shutdown nor
// a drain (S-1, S-4); and the case passes, its quarantine ended by the
// kill.
func TestQ6CaseKillsTheProducer(t *testing.T) {
	topo, err := launch.StartEPD(context.Background(), launch.Options{Binary: batonBinary, Preset: "tiny", WorkDir: t.TempDir(),
		Backend: "tcp", FaultProxy: true, TestHooks: true, ProducerQuotaBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Shutdown(context.Background(), 60*time.Second)
	first := topo.Producer.LogPath
	live := topo.Target()
	ran := 0
	for _, c := range suite.CasesForRule("Q-6") {
		if outcome, _ := c.Decide(suite.EnvOf(live)); outcome != "" {
			continue // the E+P+D copy
		}
		if !strings.Contains(c.Name, "is gone") {
			continue // the case whose producer lives on kills nothing
		}
		ran++
		if rec := runRecorded(c, live, 90*time.Second); rec.Failed() || rec.skipped {
			t.Errorf("%s: %s (failed %v, skipped %v)", c.Name, rec, rec.Failed(), rec.skipped)
		}
	}
	if ran != 1 {
		t.Fatalf("%d Q-6 cases whose producer is gone ran against E+PD; want 1", ran)
	}
	log, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	for _, drained := range []string{"S-1 shutdown accepted", "S-4 drained cleanly"} {
		if strings.Contains(string(log), drained) {
			t.Errorf("the producer the Q-6 case replaced logged %q: it was shut down, not killed; want SIGKILL (target.Crasher)", drained)
		}
	}
}
