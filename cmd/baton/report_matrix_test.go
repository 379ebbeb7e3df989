package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-dev/baton/reports"
)

// TestReportMatrix: four runs (results.json in report directories, one as
// results.yaml) make one 2x2 matrix with a column per producer>consumer
// pair, the reason of every not-applicable cell, and the worst run's exit
// code; a run without engine identities, two runs of one pair and a
// directory without results are usage errors naming the file.
func TestReportMatrix(t *testing.T) {
	dir := t.TempDir()
	run := func(name, producer, consumer string, b1 reports.Outcome, yaml bool) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		res := reports.Results{Tool: "baton check", Target: name, Verdict: reports.Worst(reports.Passed, b1),
			Engines: []reports.EngineIdentity{{Role: "producer", EngineName: producer}, {Role: "consumer", EngineName: consumer}},
			Rules:   []reports.RuleResult{{Rule: "SU-2", Level: "core", Outcome: reports.Passed, Cases: 1}, {Rule: "B-1", Level: "core", Outcome: b1, Cases: 1, Message: string(b1) + ": why " + name}}}
		write, file := reports.WriteJSON, "results.json"
		if yaml {
			write, file = reports.WriteYAML, reports.ResultsYAMLFile
		}
		if err := write(filepath.Join(d, file), res); err != nil {
			t.Fatal(err)
		}
		return d
	}
	gg := run("go-go", "go", "go", reports.Passed, false)
	gp := run("go-py", "go", "py", reports.NotApplicable, true)
	pg := run("py-go", "py", "go", reports.NotApplicable, false)
	pp := run("py-py", "py", "py", reports.Passed, false)
	var out bytes.Buffer
	js := filepath.Join(dir, "matrix.json")
	if err := runReportMatrix(&out, []string{pp, gp, pg, gg}, js); err != nil {
		t.Fatalf("a passing matrix: %v\n%s", err, out.String())
	}
	for _, want := range []string{"rule     go>go   go>py   py>go   py>py", "B-1      PASS    N/A     N/A     PASS", "go>py B-1 not applicable: why go-py", "matrix verdict: passed (2 producers x 2 consumers)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("matrix lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(js); err != nil {
		t.Errorf("--json: %v", err)
	}
	failed := run("py-py-failed", "py", "py", reports.Failed, false)
	var ex exitError
	if err := runReportMatrix(&bytes.Buffer{}, []string{gg, gp, pg, failed}, ""); !asExit(err, &ex) || ex.code != 1 {
		t.Errorf("a failed cell: %v; want exit 1", err)
	}
	if err := runReportMatrix(&bytes.Buffer{}, []string{pp, failed}, ""); !asExit(err, &ex) || ex.code != ExitUsage || !strings.Contains(ex.msg, "two runs for producer py x consumer py") {
		t.Errorf("two runs of one pair: %v", err)
	}
	anon := run("anon", "", "", reports.Passed, false)
	if err := runReportMatrix(&bytes.Buffer{}, []string{anon}, ""); !asExit(err, &ex) || ex.code != ExitUsage || !strings.Contains(ex.msg, "anon") {
		t.Errorf("a run without identities: %v", err)
	}
	empty := t.TempDir()
	if err := runReportMatrix(&bytes.Buffer{}, []string{empty}, ""); !asExit(err, &ex) || ex.code != ExitUsage || !strings.Contains(ex.msg, "no results.json") {
		t.Errorf("a directory without results: %v", err)
	}
}
