package reports_test

import (
	"time"

	"github.com/baton-dev/baton/reports"
)

// coreRules is a small level table for the certification tests.
var coreRules = map[string][]string{"core": {"SU-2", "SU-3", "L-2"}}

// certRun is a certification run of coreRules: SU-2 passed, SU-3 has the
// given outcome (a failing rule when failed), L-2 not applicable, with a
// transcript on SU-3's case and handoff latencies, and its certificate.
func certRun(su3 reports.Outcome) reports.Results {
	msg := ""
	var transcript []reports.Call
	if su3 != reports.Passed {
		msg = "Abort(ref=3f2a..) second call = ABORTED; want ALREADY_FINISHED\nat suite/su.go:120"
		transcript = []reports.Call{
			{Role: "producer", Method: "Generate", Request: "publish media=[image/png 1234 B sha256:3f2a9c01]", Code: "OK", Response: "EncoderReady(ref shared_dir opaque_state=412 B, 1 item)", StartMs: 0, LatencyMs: 12.5},
			{Role: "producer", Method: "Abort", Request: "encoder_cache ref shared_dir opaque_state=412 B", Code: "OK", Response: "ABORTED", StartMs: 13, LatencyMs: 0.8},
			{Role: "producer", Method: "Abort", Request: "encoder_cache ref shared_dir opaque_state=412 B", Code: "OK", Response: "ABORTED <want ALREADY_FINISHED>", StartMs: 14, LatencyMs: 0.7},
		}
	}
	cases := []reports.CaseResult{
		{Rule: "SU-2", Name: "SU-2 replay of a consumed reference is rejected before any write", Level: "core", Labels: []string{"SU-2", "level:core", "topology:E+PD"}, Outcome: reports.Passed, DurationMs: 40, Backends: []string{"shared_dir"}},
		{Rule: "SU-3", Name: "SU-3 Abort of a published reference answers ABORTED once, then ALREADY_FINISHED", Level: "core", Labels: []string{"SU-3", "level:core", "topology:E+PD"}, Outcome: su3, Message: msg, DurationMs: 30, Transcript: transcript},
		{Rule: "L-2", Name: "L-2 a multimodal decode without its decode preparation is rejected", Level: "core", Labels: []string{"L-2", "level:core", "topology:E+P+D"}, Outcome: reports.NotApplicable, Message: "not applicable: target does not serve topology E+P+D"},
	}
	res := reports.Summarize(cases, coreRules)
	for i := range res.Rules {
		res.Rules[i].Requirement = "The " + res.Rules[i].Rule + " sentence <b>with markup</b>."
		res.Rules[i].Contract = "CONTRACT.md#single-use-su"
	}
	res.Tool = "baton check"
	res.BatonVersion = "0.1.0"
	res.BatonCommit = "0123456789abcdef"
	res.SpecRevision = "baton.encoder.v1"
	res.Target = "test engine"
	res.Implementation = &reports.Implementation{Vendor: "Example Corp", Product: "example-serve", Version: "2.4.1", Contact: "dev@example.org"}
	res.Command = "baton check --config target.yaml --certify --bundle out/bundle"
	res.ConfigPath = "target.yaml"
	res.Config = map[string]any{"name": "test engine", "endpoints": map[string]any{"producer": "127.0.0.1:7001"}, "tls": map[string]any{"key_file": reports.Redacted}}
	res.ClaimedLevel = "core"
	res.Topologies = []string{"E+PD"}
	res.Backends = []string{"shared_dir"}
	res.StartedAt = time.Date(2025, 11, 29, 14, 43, 0, 0, time.UTC)
	res.DurationMs = 1234
	res.GPU = []reports.GPUDevice{}
	res.HandoffLatency = []reports.LatencySeries{
		{Topology: "E+PD", Phase: reports.PhasePublish, SamplesMs: []float64{10, 12, 12.5, 14, 30}},
		{Topology: "E+PD", Phase: reports.PhaseConsume, SamplesMs: []float64{5, 6, 7, 8, 9, 40}},
	}
	c := reports.IssueCertificate(res, []string{"core"}, res.Topologies, res.Backends)
	res.Certificate = &c
	return res
}
