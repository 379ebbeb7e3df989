package world

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
)

// determinismSeeds cover both backends, faults, a consumer crash and a mutant failure.
var determinismSeeds = []struct {
	seed   uint64
	mutant Mutant
}{{1, MutantNone}, {2, MutantNone}, {31, MutantNone}, {77, MutantNone}, {31, MutantConsumerFreesOnTransferError}, {3, MutantReadWithoutClaim}}

func traceOf(t *testing.T, seed uint64, m Mutant) []byte {
	t.Helper()
	var b bytes.Buffer
	Run(seed, DrawSettings(seed), Options{Mutant: m, Trace: &b})
	if b.Len() == 0 {
		t.Fatalf("seed %d: empty trace", seed)
	}
	return b.Bytes()
}

// TestDeterminismSameSeedSameTrace: the same seed gives a byte-identical
// trace twice in one process, under GOMAXPROCS 1 and 2.
func TestDeterminismSameSeedSameTrace(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range determinismSeeds {
		runtime.GOMAXPROCS(1)
		a := traceOf(t, tc.seed, tc.mutant)
		b := traceOf(t, tc.seed, tc.mutant)
		runtime.GOMAXPROCS(2)
		c := traceOf(t, tc.seed, tc.mutant)
		if !bytes.Equal(a, b) || !bytes.Equal(a, c) {
			t.Errorf("seed %d mutant %q: traces differ (%d, %d, %d bytes)", tc.seed, tc.mutant, len(a), len(b), len(c))
		}
	}
}

// TestDeterminismAcrossProcesses: a child process with GOMAXPROCS=1 writes
// the same trace bytes as this process.
func TestDeterminismAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	for _, tc := range determinismSeeds[:3] {
		path := t.TempDir() + "/trace.jsonl"
		cmd := exec.Command(os.Args[0], "-test.run=^TestDeterminismChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "BATON_SIM_CHILD_SEED="+strconv.FormatUint(tc.seed, 10), "BATON_SIM_CHILD_TRACE="+path)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child for seed %d: %v\n%s", tc.seed, err, out)
		}
		child, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if mine := traceOf(t, tc.seed, tc.mutant); !bytes.Equal(mine, child) {
			t.Errorf("seed %d: child (GOMAXPROCS=1) trace differs: %d vs %d bytes", tc.seed, len(child), len(mine))
		}
	}
}

// TestDeterminismChild is the child of TestDeterminismAcrossProcesses (a no-op otherwise).
func TestDeterminismChild(t *testing.T) {
	seedText, path := os.Getenv("BATON_SIM_CHILD_SEED"), os.Getenv("BATON_SIM_CHILD_TRACE")
	if seedText == "" || path == "" {
		t.Skip("only runs as the child of TestDeterminismAcrossProcesses")
	}
	if runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("child GOMAXPROCS %d, want 1", runtime.GOMAXPROCS(0))
	}
	seed, err := strconv.ParseUint(seedText, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, traceOf(t, seed, MutantNone), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestExploreIndependentOfJobs: the summary of a range does not depend on how
// many goroutines ran it.
func TestExploreIndependentOfJobs(t *testing.T) {
	a := Explore(1, 200, 1, MutantConsumerFreesOnTransferError, nil)
	b := Explore(1, 200, 4, MutantConsumerFreesOnTransferError, nil)
	if a.Events != b.Events || a.Ticks != b.Ticks || len(a.Failures) != len(b.Failures) {
		t.Fatalf("jobs 1: %d events %d failures; jobs 4: %d events %d failures", a.Events, len(a.Failures), b.Events, len(b.Failures))
	}
	for i := range a.Failures {
		if a.Failures[i].Seed != b.Failures[i].Seed || a.Failures[i].Failure != b.Failures[i].Failure {
			t.Errorf("failure %d: seed %d vs %d", i, a.Failures[i].Seed, b.Failures[i].Seed)
		}
	}
}
