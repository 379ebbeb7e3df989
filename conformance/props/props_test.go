package props_test

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/props"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/target/inprocess"
	"github.com/baton-dev/baton/conformance/target/simtarget"
	"github.com/baton-dev/baton/engine/server"
	"github.com/baton-dev/baton/sim"
	"pgregory.net/rapid"
)

// rapidDefaults sets rapid's checks (raceChecks under the race detector,
// which makes the engine's encoder about six times slower), steps and seed
// for one test unless the command line set them (-rapid.checks,
// -rapid.steps, -rapid.seed), and logs the seed, so a randomized run can
// be repeated.
func rapidDefaults(t *testing.T, checks, raceChecks, steps int) {
	t.Helper()
	if raceEnabled {
		checks = raceChecks
	}
	givenOnce.Do(func() { flag.Visit(func(f *flag.Flag) { given[f.Name] = true }) })
	restore := map[string]string{}
	set := func(name, v string) {
		if given[name] {
			return
		}
		restore[name] = flag.Lookup(name).Value.String()
		if err := flag.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	set("rapid.checks", strconv.Itoa(checks))
	set("rapid.steps", strconv.Itoa(steps))
	set("rapid.seed", strconv.FormatUint(testSeed(t.Name()), 10))
	t.Logf("rapid: -rapid.seed=%s -rapid.checks=%s -rapid.steps=%s", flag.Lookup("rapid.seed").Value, flag.Lookup("rapid.checks").Value, flag.Lookup("rapid.steps").Value)
	t.Cleanup(func() {
		for k, v := range restore {
			_ = flag.Set(k, v)
		}
	})
}

// explore draws a fresh rapid seed for every property test instead of the
// fixed one testSeed derives from the test's name (make props-explore).
var explore = flag.Bool("props.explore", false, "draw a fresh rapid seed per test (printed) instead of the fixed one")

// testSeed is a test's rapid seed: fixed by its name (FNV-1a, 63 bits), so
// make test gives the same verdict on every run; with -props.explore a
// fresh random one. Either way rapidDefaults prints it.
func testSeed(name string) uint64 {
	if *explore {
		var b [8]byte
		_, _ = rand.Read(b[:])
		return binary.LittleEndian.Uint64(b[:]) >> 1
	}
	h := fnv.New64a()
	h.Write([]byte("baton props/" + name))
	return h.Sum64() >> 1
}

// given holds the flags the command line set, read before any test sets one.
var (
	givenOnce sync.Once
	given     = map[string]bool{}
)

func startEPD(t testing.TB, hooks server.Hooks) (*target.Static, func() error) {
	t.Helper()
	tg, stop, err := inprocess.StartEPD(inprocess.Options{Preset: "tiny", CacheDir: t.TempDir(), Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	return tg, stop
}

// TestHandoffInProcess runs the handoff property against one in-process
// reference engine (E+PD over the shared directory, tiny preset) shared by
// every check: hundreds of checks in a few seconds.
func TestHandoffInProcess(t *testing.T) {
	rapidDefaults(t, 300, 50, 15)
	tg, stop := startEPD(t, server.Hooks{})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("drain: %v (S-2, S-4)", err)
		}
	}()
	rapid.Check(t, props.Handoff(props.Shared(tg), props.Config{}))
}

// TestHandoffWithShutdownInProcess adds the shutdown action: every check
// gets a fresh in-process engine and drains it at the end (S-1, S-2, S-4).
func TestHandoffWithShutdownInProcess(t *testing.T) {
	rapidDefaults(t, 30, 5, 15)
	dir := t.TempDir()
	n := 0
	mk := func() (target.Target, func() error, error) {
		n++
		return inprocess.StartEPD(inprocess.Options{Preset: "tiny", CacheDir: dir + "/" + strconv.Itoa(n)})
	}
	rapid.Check(t, props.Handoff(mk, props.Config{Shutdown: true}))
}

// The property's kills of the mutants (su3-release-always-aborted,
// su4-malformed-consumes, su1-read-without-claim and every other) are the
// kill table's props column (conformance/e2e TestMutantKillTableColumns):
// one fixed seed per mutant, the same verdict on every run. A test here
// that drew a fresh seed each run let su4 survive 100 checks now and then.

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// simMaker gives every check a fresh simulator target (so shutdown may be
// drawn) on backend, seeded from the check's own draw; with faults the
// target injects directed transfer faults and restarts its consumer
// (target.FaultInjector, target.Restarter), so the fault actions run too.
func simMaker(t *testing.T, backend string, m sim.Mutant, faults bool) props.Maker {
	seed := uint64(0)
	return func() (target.Target, func() error, error) {
		seed++
		// With a mutant the simulator's own checkers are off: the property must find it.
		tg, err := simtarget.New(simtarget.Options{Seed: seed, Faults: faults, Driver: sim.DriverConfig{Backend: backend, Mutant: m, Unchecked: m != sim.MutantNone}})
		if err != nil {
			return nil, nil, err
		}
		return tg, func() error {
			if msg := tg.CheckHistory(); msg != "" {
				return fmt.Errorf("history check: %s", msg)
			}
			return nil
		}, nil
	}
}

// TestHandoffSimTarget runs the handoff property, shutdown included,
// against the simulator behind the Target interface (conformance/target/
// simtarget): thousands of checks, each on a fresh world, over both
// backends, and on the transfer backend once more with directed transfer
// faults (the property's fault actions); each check's client-visible
// history must also be linearizable (porcupine).
func TestHandoffSimTarget(t *testing.T) {
	for _, tc := range []struct {
		name, backend string
		faults        bool
		checks        int // the fault scenarios hold transfer replies in real time (hundreds of ms)
	}{{sim.BackendSharedDir, sim.BackendSharedDir, false, 2000}, {sim.BackendTransfer, sim.BackendTransfer, false, 2000}, {"transfer+faults", sim.BackendTransfer, true, 300}} {
		t.Run(tc.name, func(t *testing.T) {
			rapidDefaults(t, tc.checks, tc.checks/4, 20)
			rapid.Check(t, props.Handoff(simMaker(t, tc.backend, sim.MutantNone, tc.faults), props.Config{Shutdown: tc.backend == sim.BackendSharedDir}))
		})
	}
}

// TestPropertyKillsSimMutants: the property, through the simulator target,
// kills the simulator's driver mutants it can reach from the wire.
func TestPropertyKillsSimMutants(t *testing.T) {
	for _, tc := range []struct {
		mutant  sim.Mutant
		backend string
		faults  bool
	}{
		{sim.MutantReadWithoutClaim, sim.BackendSharedDir, false},
		{sim.MutantConsumerFreesOnTransferError, sim.BackendTransfer, true},
	} {
		t.Run(string(tc.mutant), func(t *testing.T) {
			rep := props.Run(props.Handoff(simMaker(t, tc.backend, tc.mutant, tc.faults), props.Config{Shutdown: !tc.faults}), props.RunOptions{
				Name: t.Name(), Seed: testSeed(t.Name()), Checks: 1000, Steps: 20, ShrinkTime: 3 * time.Second, NoFailFile: true,
			})
			if rep.Passed {
				t.Fatalf("sim mutant %s (%s) survived 1000 checks (seed %d)", tc.mutant, sim.Mutants[tc.mutant], rep.Seed)
			}
			if !strings.Contains(rep.Output, sim.Mutants[tc.mutant]) && !strings.Contains(rep.Output, "SU-2") {
				t.Errorf("killed, but the failure names neither %s nor SU-2:\n%s", sim.Mutants[tc.mutant], rep.Output)
			}
			t.Logf("killed after %v, shrunk to %d actions:\n%s", rep.Elapsed, rep.Actions, lastLines(rep.Output, 8))
		})
	}
}
