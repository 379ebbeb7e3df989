package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/suite"
)

// TestSecurityCasesAgainstProcesses: E+PD over tcp with mTLS on every
// listener (gRPC, /metrics, the transfer agents) and an operator token,
// certificates generated at start, passes every SE-1 and SE-2 case (the
// destructive one restarts the producer), and a handoff works over TLS
// before and after; every process drains and exits 0.
func TestSecurityCasesAgainstProcesses(t *testing.T) {
	start := time.Now()
	topo, err := launch.StartEPD(context.Background(), launch.Options{Binary: batonBinary, Preset: "tiny", WorkDir: t.TempDir(),
		Backend: "tcp", Security: true, TestHooks: true, Level: "lifecycle", ProducerQuotaBytes: 32 << 20})
	if err != nil {
		t.Fatalf("start topology: %v", err)
	}
	live := topo.Target()
	p := live.Profile()
	if p.TLS == nil || !p.TLS.ClientAuth || len(p.TLS.Listeners) < 3 || p.Authorization == nil {
		t.Fatalf("profile of a secure topology = tls %+v, authorization %+v; want mTLS with metrics and transfer listeners, and an operator", p.TLS, p.Authorization)
	}
	cases := append(suite.CasesForRule("SE-1"), suite.CasesForRule("SE-2")...)
	cases = append(cases, suite.CasesForRule("SU-2")[0]) // a handoff over tcp with TLS on both connections
	for _, c := range cases {
		rec := runRecorded(c, live, 90*time.Second)
		if rec.Failed() || rec.skipped {
			t.Errorf("%s: %s (failed %v, skipped %v)", c.Name, rec, rec.Failed(), rec.skipped)
		}
	}
	if err := topo.Shutdown(context.Background(), 60*time.Second); err != nil {
		t.Errorf("S-4 shutdown of the secure topology: %v", err)
	}
	t.Logf("%d SE-1/SE-2 cases against E+PD over tcp with mTLS and authorization: %v", len(cases), time.Since(start).Round(time.Millisecond))
}
