package check

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
)

// TestRunRefusesUnboundedCaseTimeout: Options.CaseTimeout has the
// profile's upper bound (target.MaxCaseTimeout), so a program driving Run
// cannot let a hung target keep a case running for ever (attack, stop 23);
// Run refuses before it touches the target (dialled lazily, nothing listens).
func TestRunRefusesUnboundedCaseTimeout(t *testing.T) {
	tg, err := target.Dial(target.Config{
		Profile:   target.Profile{Name: "unreached", Topologies: []string{"E+PD"}, CaseTimeout: 10 * time.Second},
		Endpoints: map[target.Role]string{target.RoleProducer: "127.0.0.1:1", target.RoleConsumer: "127.0.0.1:1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	for _, d := range []time.Duration{-time.Second, 100000 * time.Hour} {
		_, err := Run(context.Background(), tg, Options{CaseTimeout: d})
		if err == nil || !strings.Contains(err.Error(), "case timeout") {
			t.Errorf("Run(CaseTimeout %v) = %v; want the case timeout refused", d, err)
		}
	}
}
