package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-dev/baton/sim"
)

// TestParseSeedRangeMalformed: --seeds takes only A..B with A <= B.
func TestParseSeedRangeMalformed(t *testing.T) {
	for _, s := range []string{"", "5", "1-9", "9..1", "a..b", "1..", "..3", "-1..3", "0..99999999999"} {
		if _, _, err := parseSeedRange(s); err == nil {
			t.Errorf("parseSeedRange(%q) accepted", s)
		}
	}
	if a, b, err := parseSeedRange("3..7"); err != nil || a != 3 || b != 7 {
		t.Errorf("parseSeedRange(3..7) = %d, %d, %v", a, b, err)
	}
}

func runSim(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := simCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	code := 0
	if err != nil {
		var ex exitError
		if !asExit(err, &ex) {
			t.Fatalf("sim %v: %v", args, err)
		}
		code = ex.code
	}
	return out.String(), code
}

// TestSimCommandSeed: one seed prints SEED= and the settings first and ends
// with PASSED (N ticks), exit 0; a mutant's seed ends with the replay
// command, exit 1, and its trace replays to the same failure.
func TestSimCommandSeed(t *testing.T) {
	out, code := runSim(t, "--seed", "5")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || lines[0] != "SEED=5" || !strings.HasPrefix(lines[1], "backend=") || !strings.HasPrefix(lines[len(lines)-1], "PASSED (") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	seed := uint64(1)
	for sim.RunSeed(seed, sim.Options{Mutant: sim.MutantConsumerFreesOnTransferError}).Verdict == sim.Passed {
		seed++
	}
	n := strconv.FormatUint(seed, 10)
	dir := t.TempDir()
	out, code = runSim(t, "--seed", n, "--mutant", "consumer-frees-on-transfer-error", "--trace-dir", dir)
	if code != 1 || !strings.Contains(out, "replay: baton sim --seed "+n+" --mutant consumer-frees-on-transfer-error") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	trace := filepath.Join(dir, "seed-"+n+".jsonl")
	if _, err := os.Stat(trace); err != nil {
		t.Fatal(err)
	}
	rep := simCommand()
	var rout bytes.Buffer
	rep.SetOut(&rout)
	rep.SetArgs([]string{"replay", trace})
	err := rep.Execute()
	var ex exitError
	if !asExit(err, &ex) || ex.code != 1 || !strings.Contains(rout.String(), "Q-1") {
		t.Fatalf("replay: %v, output:\n%s", err, rout.String())
	}
}

// TestSimCommandRange: a range prints a summary and each failing seed with
// its replay command; bad flags are usage errors.
func TestSimCommandRange(t *testing.T) {
	out, code := runSim(t, "--seeds", "1..40", "--jobs", "2", "--progress", "off", "--mutant", "read-without-claim")
	if code != 1 || !strings.Contains(out, "seeds 1..40: 40 runs") || !strings.Contains(out, "FAIL seed=") || !strings.Contains(out, "--mutant read-without-claim") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	for _, args := range [][]string{{"--seeds", "9..1"}, {"--seed", "1", "--seeds", "1..2"}, {"--mutant", "nope", "--seed", "1"}} {
		if _, code := runSim(t, args...); code != ExitUsage {
			t.Errorf("sim %v: exit %d, want %d", args, code, ExitUsage)
		}
	}
}
