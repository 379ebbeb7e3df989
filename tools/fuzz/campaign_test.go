// Package fuzz holds the fuzzing campaign script (campaign.sh) and the test
// that keeps it covering every fuzz target of the module.
package fuzz

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fuzzFunc is how `make fuzz` and campaign.sh find a fuzz target: a line
// starting `func FuzzXxx` in a _test.go file.
var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]*)`)

// moduleFuzzTargets walks the module at root and returns every fuzz
// target as "pkg/dir:FuzzName", sorted.
func moduleFuzzTargets(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllStringSubmatch(string(src), -1) {
			out = append(out, filepath.ToSlash(rel)+":"+m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestCampaignListsEveryFuzzTarget: `campaign.sh list`, the targets a
// campaign run without names fuzzes, is every fuzz target of the module
// (issue 15: a fuzz target for every parser, each run by the campaign),
// found as the Makefile's fuzz target finds them; the reference parser's
// and the safetensors decoder's among them.
func TestCampaignListsEveryFuzzTarget(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash: campaign.sh is a bash script")
	}
	want := moduleFuzzTargets(t, filepath.Join("..", ".."))
	for _, must := range []string{"engine/handoff:FuzzParseReference", "engine/cache/shareddir:FuzzDecodeSafetensors"} {
		if !slices.Contains(want, must) {
			t.Fatalf("the module has no fuzz target %s; the test's walk is wrong (found %v)", must, want)
		}
	}
	out, err := exec.Command("bash", "campaign.sh", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("campaign.sh list: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	slices.Sort(got)
	var missing, extra []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("campaign.sh list leaves out %v and names %v that are no fuzz target; want exactly the module's %d targets", missing, extra, len(want))
	}
}

// TestClassify: a fuzz run's verdict (campaign.sh classify, which make
// fuzz uses). Only a bare "context deadline exceeded" at the -fuzztime
// boundary, with no failing input written, is Go 1.26's coordinator race
// (go.dev/issue/75804) and passes; a written input, a panic, a t.Error
// line or any other failure fails. The logs are the shapes `go test -fuzz`
// prints (the boundary one from this project's CI, FuzzDecodeDataURI).
func TestClassify(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash: campaign.sh is a bash script")
	}
	for _, tc := range []struct {
		name, log string
		exit      int
		want      string
	}{
		{"passed", "fuzz: elapsed: 30s, execs: 748393 (24946/sec)\nPASS\nok  \tx\t30.1s\n", 0, "ok"},
		{"boundary race", "fuzz: elapsed: 30s, execs: 748393 (30812/sec), new interesting: 128 (total: 150)\nfuzz: elapsed: 30s, execs: 748393 (0/sec), new interesting: 128 (total: 150)\n--- FAIL: FuzzDecodeDataURI (30.45s)\n    context deadline exceeded\nFAIL\nexit status 1\nFAIL\tgithub.com/baton-dev/baton/engine/encoder\t30.477s\n", 1, "ok (boundary race)"},
		{"failing input", "--- FAIL: FuzzX (1.2s)\n    --- FAIL: FuzzX (0.00s)\n        x_test.go:12: accepted garbage\n    Failing input written to testdata/fuzz/FuzzX/abc\n    To re-run:\n    go test -run=FuzzX/abc\nFAIL\n", 1, "FAIL"},
		{"panic", "--- FAIL: FuzzX (0.3s)\n    context deadline exceeded\npanic: runtime error: index out of range\nFAIL\n", 2, "FAIL"},
		{"a t.Error line with the deadline", "--- FAIL: FuzzX (30.1s)\n    fuzz_test.go:40: decode hung\n    context deadline exceeded\nFAIL\n", 1, "FAIL"},
		{"fuzzed nothing", "fuzz: elapsed: 30s, execs: 26 (0/sec), new interesting: 0 (total: 24)\nPASS\nok  \tx\t30.6s\n", 0, "FAIL (26 executions, fewer than 1000: fuzzed nothing)"},
		{"boundary race after fuzzing nothing", "fuzz: elapsed: 30s, execs: 26 (0/sec), new interesting: 0 (total: 24)\n--- FAIL: FuzzScenario (30.45s)\n    context deadline exceeded\nFAIL\n", 1, "FAIL (26 executions, fewer than 1000: fuzzed nothing)"},
		{"build failure", "# x\n./x_test.go:3:1: syntax error\nFAIL\tx [build failed]\n", 1, "FAIL"},
	} {
		log := filepath.Join(t.TempDir(), "log")
		if err := os.WriteFile(log, []byte(tc.log), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("bash", "campaign.sh", "classify", log, fmt.Sprint(tc.exit)).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
			t.Errorf("%s: classify = %q (%v); want %q", tc.name, got, err, tc.want)
		}
	}
}
