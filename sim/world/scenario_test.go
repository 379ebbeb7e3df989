package world

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestScenarios runs every script under testdata/scenarios (one world per
// file) and compares each command's output with the file; `go test ./sim
// -run TestScenarios -rewrite` regenerates the expected output. A public
// bug scenario handed to baton lands here as one more file.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		sc := NewScenario()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			for _, a := range d.CmdArgs {
				args[a.Key] = strings.Join(a.Vals, ",")
			}
			return sc.Do(d.Cmd, args)
		})
	})
}
