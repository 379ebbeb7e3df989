package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance"
	"github.com/baton-dev/baton/conformance/launch"
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
