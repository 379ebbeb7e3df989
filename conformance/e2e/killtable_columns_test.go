package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/mutants"
	"github.com/baton-dev/baton/conformance/props"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/target/inprocess"
	"github.com/baton-dev/baton/conformance/target/simtarget"
	"github.com/baton-dev/baton/engine/server"
	"github.com/baton-dev/baton/sim"
)

// killColumnChecks is the props column's budget per mutant (checks of the
// handoff property against the in-process engine with the mutant's hooks).
const killColumnChecks = 100

// propsMustKill lists the conformance mutants the handoff property must
// kill (S-1 with the shutdown action, on a fresh engine per check); the
// rest are outside what it draws (tcp faults, test hooks, media,
// baselines, TTLs) and are reported, not asserted.
var propsMustKill = map[string]bool{
	"su1-read-without-claim": true, "su3-release-always-aborted": true, "su4-malformed-consumes": true,
	"su5-unsigned-references": true, "su6-entry-id-from-content": true, "s1-shutdown-ignores-id": true,
}

// TestMutantKillTableColumns prints the props and sim columns of the kill
// table (TestMutantKillTable prints the suite's): for every conformance
// mutant, whether the handoff property kills it in-process, in what time
// and with how short a shrunk sequence; whether the simulator's driver
// mutant of the same rule is killed by the simulator (first failing seed)
// and by the property through the simulator target; and one row per
// driver mutant with no conformance counterpart.
func TestMutantKillTableColumns(t *testing.T) {
	simOf := map[string]sim.Mutant{}
	for m, rule := range sim.Mutants {
		simOf[rule] = m
	}
	var rows []string
	row := func(name, rule, propsCol, simCol string) {
		rows = append(rows, fmt.Sprintf("%-38s %-5s %-40s %s", name, rule, propsCol, simCol))
	}
	seen := map[sim.Mutant]bool{}
	for _, m := range mutants.All() {
		t.Run(m.Name, func(t *testing.T) {
			propsCol := "n/a (tcp + fault proxy: not in-process)"
			if m.Topology != mutants.TopologyTCPFaults {
				var hooks server.Hooks
				m.Apply(&hooks)
				var rep props.Report
				if m.Rule == "S-1" {
					// Shutdown is destructive: a fresh engine per check.
					dir, n := t.TempDir(), 0
					mk := func() (target.Target, func() error, error) {
						n++
						tg, stop, err := inprocess.StartEPD(inprocess.Options{Preset: "tiny", CacheDir: fmt.Sprintf("%s/%d", dir, n), Hooks: hooks})
						return tg, func() error { _ = stop(); return nil }, err
					}
					rep = props.Run(props.Handoff(mk, props.Config{Shutdown: true}), props.RunOptions{
						Name: t.Name(), Checks: killColumnChecks / 4, Steps: 15, ShrinkTime: 3 * time.Second, NoFailFile: true})
				} else {
					tg, stop, err := inprocess.StartEPD(inprocess.Options{Preset: "tiny", CacheDir: t.TempDir(), Hooks: hooks})
					if err != nil {
						t.Fatal(err)
					}
					rep = props.Run(props.Handoff(props.Shared(tg), props.Config{}), props.RunOptions{
						Name: t.Name(), Checks: killColumnChecks, Steps: 15, ShrinkTime: 3 * time.Second, NoFailFile: true})
					_ = stop() // a mutant may not drain cleanly; not what is judged here
				}
				propsCol = killCell(rep)
				if !rep.Passed {
					t.Logf("props killed %s (seed %d):\n%s", m.Name, rep.Seed, lastLines(rep.Output, 8))
				}
				if rep.Passed && propsMustKill[m.Name] {
					t.Errorf("mutant %s (%s) survived %d checks of the handoff property (seed %d)", m.Name, m.Rule, killColumnChecks, rep.Seed)
				}
			}
			simCol := "no driver mutant of this rule"
			if sm, ok := simOf[m.Rule]; ok {
				seen[sm] = true
				simCol = simKillCell(t, sm)
			}
			row(m.Name, m.Rule, propsCol, simCol)
		})
	}
	for _, sm := range sortedSimMutants() {
		if seen[sm] {
			continue
		}
		propsCol := "n/a (no wire-visible symptom without faults)"
		if sm == sim.MutantReadWithoutClaim {
			propsCol = killCell(propsOnSim(sm))
		}
		row("sim:"+string(sm), sim.Mutants[sm], propsCol, simKillCell(t, sm))
	}
	t.Logf("kill table, props and sim columns (suite column: TestMutantKillTable):\n%-38s %-5s %-40s %s\n%s",
		"mutant", "rule", "props (killed in, shrunk length)", "sim (first failing seed, time)", strings.Join(rows, "\n"))
}

// killCell renders one props verdict.
func killCell(rep props.Report) string {
	if rep.Passed {
		return fmt.Sprintf("SURVIVED %d checks", killColumnChecks)
	}
	return fmt.Sprintf("KILLED %.1fs, %d actions", rep.Elapsed.Seconds(), rep.Actions)
}

// simKillCell runs seeds 1..2000 with sm until one fails with its rule.
func simKillCell(t *testing.T, sm sim.Mutant) string {
	t.Helper()
	start := time.Now()
	for seed := uint64(1); seed <= 2000; seed++ {
		if r := sim.RunSeed(seed, sim.Options{Mutant: sm}); r.Verdict != sim.Passed {
			if r.Rule != sim.Mutants[sm] {
				return fmt.Sprintf("KILLED seed %d by %s (not %s)", seed, r.Rule, sim.Mutants[sm])
			}
			return fmt.Sprintf("KILLED seed %d, %.2fs (%s)", seed, time.Since(start).Seconds(), sm)
		}
	}
	t.Errorf("driver mutant %s survived seeds 1..2000", sm)
	return "SURVIVED seeds 1..2000"
}

// propsOnSim runs the property through the simulator target with driver
// mutant sm and the simulator's own checkers off.
func propsOnSim(sm sim.Mutant) props.Report {
	seed := uint64(0)
	return props.Run(props.Handoff(func() (target.Target, func() error, error) {
		seed++
		tg, err := simtarget.New(simtarget.Options{Seed: seed, Driver: sim.DriverConfig{Backend: sim.BackendSharedDir, Mutant: sm, Unchecked: true}})
		return tg, func() error { return nil }, err
	}, props.Config{}), props.RunOptions{Name: "sim-" + string(sm), Checks: 1000, Steps: 20, ShrinkTime: 3 * time.Second, NoFailFile: true})
}

func sortedSimMutants() []sim.Mutant {
	var out []sim.Mutant
	for m := range sim.Mutants {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
