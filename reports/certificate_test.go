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
			if !slices.Equal(c.Backends, []string{"shared_dir"}) {
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
