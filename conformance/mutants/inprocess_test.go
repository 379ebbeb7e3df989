package mutants

import (
	"context"
	"net"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/server"
)

// inProcessKillers are the cases (function names) each InProcess mutant
// must fail.
var inProcessKillers = map[string][]string{
	"su1-process-local-claim":              {"SU1TwoConsumerProcessesOneWins"},
	"su3-release-answers-from-table":       {"SU3AbortRacesConsume"},
	"x2-collector-trusts-table":            {"X2ConsumeRacesExpiry"},
	"b2-published-hash-without-dimensions": {"B2NearImagesDifferentAnswers"},
	"b2-published-hash-of-sampled-pixels":  {"B2NearImagesDifferentAnswers"},
	"b1-shared-receive-buffer":             {"B1LargeImagesUnderLoad"},
}

// funcName is the bare name of the function registered as c.Run.
func funcName(c suite.Case) string {
	full := runtime.FuncForPC(reflect.ValueOf(c.Run).Pointer()).Name()
	return full[strings.LastIndex(full, ".")+1:]
}

// startTopology starts, in this process, E, PD, a second PD and the
// baseline with the mutant's hooks over one shared directory (tiny preset,
// test hooks on) and returns the target: what `baton serve --mutant`
// processes would be, one engine per role.
func startTopology(t *testing.T, m Mutant) target.Target {
	t.Helper()
	var hooks server.Hooks
	m.Apply(&hooks)
	dir := t.TempDir()
	engines := map[target.Role]target.Engine{}
	for _, r := range []struct {
		role server.Role
		as   target.Role
	}{{server.RoleEncoder, target.RoleProducer}, {server.RolePD, target.RoleConsumer}, {server.RolePD, target.RoleSecondConsumer}, {server.RoleAggregated, target.RoleBaseline}} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := server.Config{Role: r.role, Preset: "tiny", CacheDir: dir, Hooks: hooks, ShutdownLinger: time.Millisecond, ProducerQuotaBytes: 16 << 20, TestHooks: true}
		if r.role == server.RoleAggregated {
			cfg.CacheDir = ""
		}
		srv, err := server.NewServer(cfg, lis, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		eng, err := target.DialEngine(lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		engines[r.as] = eng
		t.Cleanup(func() {
			cancel()
			<-done // a mutant may not drain cleanly: that is not what is judged here
			eng.Close()
		})
	}
	return target.NewStatic(target.Profile{
		Name: "mutant " + m.Name, Level: "lifecycle", Topologies: []string{target.TopologyEPD}, Backends: []string{server.BackendSharedDir},
		Observables: true, TestHooks: true, ProducerQuotaBytes: 16 << 20, ReferenceFormat: suite.FormatBatonJSONv1, CaseTimeout: time.Minute,
	}, engines)
}

// TestInProcessMutantsKilled starts each InProcess mutant in process (E,
// two PDs, the baseline, over one shared directory) and runs its killers
// (inProcessKillers): each fails, on its own rule. The volume mutant's
// killer runs only with BATON_VOLUME=1 (make ci-long).
func TestInProcessMutantsKilled(t *testing.T) {
	byFunc := map[string]suite.Case{}
	for _, c := range suite.Cases() {
		if !c.UnderFaults && !c.ViaPrefill {
			byFunc[funcName(c)] = c
		}
	}
	for _, m := range InProcess() {
		t.Run(m.Name, func(t *testing.T) {
			if m.Rule == "" || m.Breaks == "" || m.Apply == nil || slices.ContainsFunc(All(), func(o Mutant) bool { return o.Name == m.Name }) {
				t.Fatalf("mutant %+v: want a rule, what it breaks, a hook, and a name All does not use", m)
			}
			if got, err := ByName(m.Name); err != nil || got.Name != m.Name {
				t.Fatalf("ByName(%q) = %v, %v", m.Name, got.Name, err)
			}
			killers := inProcessKillers[m.Name]
			if len(killers) == 0 {
				t.Fatalf("mutant %s names no killer in inProcessKillers", m.Name)
			}
			var tg target.Target
			for _, name := range killers {
				c, ok := byFunc[name]
				if !ok || c.Rule != m.Rule {
					t.Fatalf("killer %s of %s: registered %v, rule %q; want a case of %s", name, m.Name, ok, c.Rule, m.Rule)
				}
				if c.Needs.Volume && !suite.VolumeRequested() {
					t.Logf("%s runs only with %s=1", c.Name, suite.EnvVolume)
					continue
				}
				if tg == nil {
					tg = startTopology(t, m)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				r := suite.Record(ctx, c, tg)
				cancel()
				if !r.Failed {
					t.Errorf("%s against mutant %s (%s) = %s (%v); want failed", c.Name, m.Name, m.Breaks, r.Outcome, r.Messages)
				} else {
					t.Logf("%s kills %s: %s", name, m.Name, r.Messages[0])
				}
			}
		})
	}
}
