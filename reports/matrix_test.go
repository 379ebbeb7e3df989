package reports

import (
	"strings"
	"testing"
)

func matrixRun(producer, consumer string, rules ...RuleResult) Results {
	r := Results{Engines: []EngineIdentity{{Role: "producer", EngineName: producer}, {Role: "consumer", EngineName: consumer}, {Role: "baseline", EngineName: consumer}}}
	r.Rules = rules
	r.Verdict = Passed
	for _, rr := range rules {
		r.Verdict = Worst(r.Verdict, rr.Outcome)
	}
	return r
}

func TestMatrixFromResults(t *testing.T) {
	runs := []Results{
		matrixRun("python", "go", RuleResult{Rule: "SU-2", Outcome: Passed}, RuleResult{Rule: "B-1", Outcome: NotApplicable, Message: "different models"}),
		matrixRun("go", "go", RuleResult{Rule: "SU-2", Outcome: Passed}, RuleResult{Rule: "B-1", Outcome: Passed}),
		matrixRun("go", "python", RuleResult{Rule: "SU-2", Outcome: Failed, Message: "Consume = OK; want INVALID_ARGUMENT"}, RuleResult{Rule: "B-1", Outcome: NotApplicable}, RuleResult{Rule: "L-1", Outcome: Passed}),
	}
	m, err := MatrixFromResults(runs, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(m.Producers, ",") != "go,python" || strings.Join(m.Consumers, ",") != "go,python" {
		t.Errorf("axes = %v x %v", m.Producers, m.Consumers)
	}
	if strings.Join(m.Rules, ",") != "SU-2,B-1,L-1" {
		t.Errorf("rules = %v; want the first run's order, then later ones", m.Rules)
	}
	if m.Verdict != Failed {
		t.Errorf("verdict = %s; want failed (worst cell)", m.Verdict)
	}
	if c, ok := m.Cell("go", "python"); !ok || c.Rules["SU-2"] != Failed || c.Messages["SU-2"] == "" {
		t.Errorf("cell go>python = %+v, %v", c, ok)
	}
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"go>go", "go>python", "python>go", "SU-2     PASS", "go>python SU-2 failed: Consume = OK", "python>go B-1 not applicable: different models", "matrix verdict: failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestMatrixRejectsBadInput(t *testing.T) {
	if _, err := MatrixFromResults(nil, nil); err == nil {
		t.Error("no runs: want an error")
	}
	if _, err := MatrixFromResults([]Results{{}}, []string{"old/results.json"}); err == nil || !strings.Contains(err.Error(), "old/results.json") {
		t.Errorf("results without engines: err = %v; want one naming the file", err)
	}
	two := []Results{matrixRun("go", "go"), matrixRun("go", "go")}
	if _, err := MatrixFromResults(two, []string{"x", "y"}); err == nil || !strings.Contains(err.Error(), "two runs for producer go x consumer go") {
		t.Errorf("duplicate pair: err = %v", err)
	}
}
