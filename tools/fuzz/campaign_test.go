// Package fuzz holds the fuzzing campaign script (campaign.sh) and the test
// that keeps it covering every fuzz target of the module.
package fuzz

import (
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
