package reports

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"sort"
	"strings"
)

//go:embed report.html.tmpl
var reportTemplate string

// reportTmpl is the parsed report.html template.
var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"cls":   outcomeClass,
	"first": firstLine,
	"ms":    fmtMs,
	"lower": strings.ToLower,
}).Parse(reportTemplate))

// ReportContentSecurityPolicy is the page's Content-Security-Policy: no
// network at all (inline style and script only, images only as data: URIs),
// so a report opened from a bundle never reaches out, and a browser test
// sees any attempt as a console error.
const ReportContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

// DefaultConfigPath is the profile path the reproduce command names when
// the results carry none (a `baton demo` run builds its profile in memory).
const DefaultConfigPath = "target.yaml"

// WriteHTML writes res to path as report.html (RenderHTML), creating path's
// directory if needed.
func WriteHTML(path string, res Results) error {
	raw, err := RenderHTML(res)
	if err != nil {
		return fmt.Errorf("reports: render %s: %w", path, err)
	}
	return writeFileAtomic(path, raw)
}

// RenderHTML renders res as one self-contained HTML page (inline CSS, JS
// and SVG; a Content-Security-Policy that forbids any network access):
//
//   - a verdict banner per level (id "verdict-<level>") and one for the run
//     (id "verdict"), and the certificate when there is one;
//   - the rule table: rule ID (a link to the rule's section of CONTRACT.md,
//     RuleResult.Contract, with the rule's sentence as its title, and a
//     "¶" link to that sentence further down the page), level, outcome,
//     cases, message; each row has id "rule-<level>-<RULE>" and class
//     "outcome-<outcome>";
//   - the handoff latency histogram per topology (LatencyHistogramSVGs);
//   - for each failed or error case: its message, the reproduce command
//     (ReproduceCommand) and its redacted request/response transcript;
//   - the run's metadata, GPU inventory and redacted configuration;
//   - the contract text of each rule (id "contract-<RULE>"), linking to
//     its section of CONTRACT.md.
func RenderHTML(res Results) ([]byte, error) {
	v := newHTMLView(res)
	var buf bytes.Buffer
	if err := reportTmpl.Execute(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReproduceCommand is the command that re-runs the cases of one rule
// against the same target:
//
//	baton check --config target.yaml --label-filter 'SU-2'
//
// The profile path is res.ConfigPath, else DefaultConfigPath; both are
// shell-quoted when needed.
func ReproduceCommand(res Results, rule string) string {
	cfg := res.ConfigPath
	if cfg == "" {
		cfg = DefaultConfigPath
	}
	return "baton check --config " + ShellQuote(cfg) + " --label-filter " + shellQuoteAlways(rule)
}

// ShellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and -_./:=+@%, (single quotes; embedded ones escaped).
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+@%,", r))
	}) < 0 {
		return s
	}
	return shellQuoteAlways(s)
}

func shellQuoteAlways(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// outcomeClass is the CSS class of an outcome ("outcome-not-applicable").
func outcomeClass(o Outcome) string {
	if !o.Valid() {
		return "outcome-unknown"
	}
	return "outcome-" + strings.ReplaceAll(string(o), " ", "-")
}

type htmlBanner struct {
	ID, Label string
	Outcome   Outcome
}

type htmlRule struct {
	RuleResult
	ContractID string
}

type htmlFailure struct {
	CaseResult
	ID        string
	Reproduce string
}

type htmlContract struct {
	Rule, Level, ID, Requirement, Href, Section string
}

type htmlView struct {
	R            Results
	CSP          string
	Title        string
	Banners      []htmlBanner
	Rules        []htmlRule
	Failures     []htmlFailure
	Plots        []template.HTML
	ConfigYAML   string
	Contract     []htmlContract
	LevelsText   string
	CasesByOut   []string
	HasLatencies bool
}

func newHTMLView(res Results) htmlView {
	v := htmlView{R: res, CSP: ReportContentSecurityPolicy}
	v.Title = "baton conformance report"
	if res.Target != "" {
		v.Title += ": " + res.Target
	}
	levels := make([]string, 0, len(res.Levels))
	for l := range res.Levels {
		levels = append(levels, l)
	}
	sortLevels(levels)
	v.Banners = append(v.Banners, htmlBanner{ID: "verdict", Label: "run", Outcome: res.Verdict})
	for _, l := range levels {
		v.Banners = append(v.Banners, htmlBanner{ID: "verdict-" + l, Label: l, Outcome: res.Levels[l]})
	}
	seen := map[string]bool{}
	for _, r := range res.Rules {
		v.Rules = append(v.Rules, htmlRule{RuleResult: r, ContractID: "contract-" + r.Rule})
		if seen[r.Rule] {
			continue
		}
		seen[r.Rule] = true
		c := htmlContract{Rule: r.Rule, Level: r.Level, ID: "contract-" + r.Rule, Requirement: r.Requirement, Href: r.Contract}
		if i := strings.IndexByte(r.Contract, '#'); i >= 0 {
			c.Section = r.Contract[i+1:]
		}
		v.Contract = append(v.Contract, c)
	}
	for i, c := range res.Cases {
		if c.Outcome != Failed && c.Outcome != Error {
			continue
		}
		f := htmlFailure{CaseResult: c, ID: fmt.Sprintf("case-%d", i)}
		if c.Rule != "" {
			f.Reproduce = ReproduceCommand(res, c.Rule)
		}
		v.Failures = append(v.Failures, f)
	}
	v.Plots = LatencyHistogramSVGs(res.HandoffLatency)
	v.ConfigYAML = configYAML(res.Config)
	n := map[Outcome]int{}
	for _, c := range res.Cases {
		n[c.Outcome]++
	}
	outs := make([]Outcome, 0, len(n))
	for o := range n {
		outs = append(outs, o)
	}
	sort.Slice(outs, func(i, j int) bool { return severity(outs[i]) > severity(outs[j]) })
	for _, o := range outs {
		v.CasesByOut = append(v.CasesByOut, fmt.Sprintf("%d %s", n[o], o))
	}
	return v
}
