package reports_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/baton-dev/baton/reports"
)

func TestIssueCertificate(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(*reports.Results)
		levels     []string
		topologies []string
		issued     bool
		reason     string // a substring of some reason when refused
		covers     []string
	}{
		{name: "every rule passed or not applicable", levels: []string{"core"}, topologies: []string{"E+PD"}, issued: true, covers: []string{"E+PD"}},
		{name: "a declared topology no case exercised is not covered", levels: []string{"core"}, topologies: []string{"E+PD", "E+P+D"}, issued: true, covers: []string{"E+PD"}},
		{name: "failed rule", levels: []string{"core"}, topologies: []string{"E+PD"},
			mutate: func(r *reports.Results) { *r = certRun(reports.Failed) }, reason: "SU-3 (core) failed: Abort(ref=3f2a..)"},
		{name: "not verifiable rule", levels: []string{"core"}, topologies: []string{"E+PD"},
			mutate: func(r *reports.Results) { *r = certRun(reports.NotVerifiable) }, reason: "SU-3 (core) not verifiable"},
		{name: "error rule", levels: []string{"core"}, topologies: []string{"E+PD"},
			mutate: func(r *reports.Results) { *r = certRun(reports.Error) }, reason: "SU-3 (core) error"},
		{name: "filtered run", levels: []string{"core"}, topologies: []string{"E+PD"},
			mutate: func(r *reports.Results) { r.LabelFilter = "SU-2" }, reason: "filtered"},
		{name: "claimed level missing from the results", levels: []string{"core", "lifecycle"}, topologies: []string{"E+PD"}, reason: "level lifecycle has no verdict"},
		{name: "harness-level error", levels: []string{"core"}, topologies: []string{"E+PD"},
			mutate: func(r *reports.Results) {
				r.Cases = append(r.Cases, reports.CaseResult{Name: "[BeforeSuite]", Outcome: reports.Error, Message: "harness error: probe"})
			}, reason: "[BeforeSuite] error"},
		{name: "no declared topology exercised", levels: []string{"core"}, topologies: []string{"E+P+D"}, reason: "no passed case exercised a declared topology"},
		{name: "no level claimed", levels: nil, topologies: []string{"E+PD"}, reason: "no level claimed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := certRun(reports.Passed)
			if tt.mutate != nil {
				tt.mutate(&res)
			}
			c := reports.IssueCertificate(res, tt.levels, tt.topologies, []string{"shared_dir"})
			if c.Issued != tt.issued {
				t.Fatalf("Issued = %v (reasons %q); want %v", c.Issued, c.Reasons, tt.issued)
			}
			if tt.issued && len(c.Reasons) != 0 {
				t.Errorf("issued with reasons %q", c.Reasons)
			}
			if !tt.issued && !slices.ContainsFunc(c.Reasons, func(r string) bool { return strings.Contains(r, tt.reason) }) {
				t.Errorf("reasons %q; want one containing %q", c.Reasons, tt.reason)
			}
			if tt.covers != nil && !slices.Equal(c.Topologies, tt.covers) {
				t.Errorf("topologies = %v; want %v", c.Topologies, tt.covers)
			}
			if tt.levels != nil && !slices.Equal(c.Backends, []string{"shared_dir"}) {
				t.Errorf("backends = %v; want [shared_dir]", c.Backends)
			}
			line := c.Line()
			if tt.issued && !strings.Contains(line, "issued for level core (topologies E+PD; backends shared_dir)") {
				t.Errorf("Line() = %q", line)
			}
			if !tt.issued && !strings.Contains(line, "refused") {
				t.Errorf("Line() = %q; want it to say refused", line)
			}
		})
	}
}

// TestCertificateCoversWhatRan: a certificate names only the declared
// backends passed cases handed off over, and the security features whose
// rules passed.
func TestCertificateCoversWhatRan(t *testing.T) {
	res := certRun(reports.Passed)
	c := reports.IssueCertificate(res, []string{"core"}, []string{"E+PD"}, []string{"shared_dir", "cuda_ipc"})
	if !c.Issued || !slices.Equal(c.Backends, []string{"shared_dir"}) {
		t.Errorf("issued %v, backends %v; want issued for shared_dir only (no case ran on cuda_ipc)", c.Issued, c.Backends)
	}
	c = reports.IssueCertificate(res, []string{"core"}, []string{"E+PD"}, []string{"cuda_ipc"})
	if c.Issued || !slices.ContainsFunc(c.Reasons, func(r string) bool { return strings.Contains(r, "no passed case handed off over a declared backend") }) {
		t.Errorf("certificate for a backend no case used = %+v; want refused", c)
	}
	c = reports.IssueCertificate(res, []string{"core"}, []string{"E+PD"}, nil)
	if !c.Issued || !slices.Equal(c.Backends, []string{"shared_dir"}) {
		t.Errorf("no declared backends: issued %v, backends %v; want the backends the cases used", c.Issued, c.Backends)
	}

	features := []reports.FeatureRule{{Rule: "SE-1", Feature: "tls"}, {Rule: "SE-2", Feature: "authorization"}}
	cases := append([]reports.CaseResult(nil), res.Cases...)
	cases = append(cases, reports.CaseResult{Rule: "SE-1", Name: "SE-1 tls", Level: "core", Labels: []string{"SE-1", "level:core"}, Outcome: reports.Passed})
	tls := reports.Summarize(cases, map[string][]string{"core": {"SU-2", "SU-3", "L-2", "SE-1"}})
	tls.LabelFilter = ""
	c = reports.IssueCertificate(tls, []string{"core"}, []string{"E+PD"}, []string{"shared_dir"}, features...)
	if !c.Issued || !slices.Equal(c.SecurityFeatures, []string{"tls"}) || !strings.Contains(c.Line(), "security tls") {
		t.Errorf("certificate = %+v (%s); want issued, covering the security feature tls only", c, c.Line())
	}
	c = reports.IssueCertificate(res, []string{"core"}, []string{"E+PD"}, []string{"shared_dir"}, features...)
	if len(c.SecurityFeatures) != 0 || c.SecurityFeatures == nil {
		t.Errorf("security features without their rules = %#v; want an empty list", c.SecurityFeatures)
	}
}
