package reports

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/baton-dev/baton/internal/contract"
)

//go:embed report.html.tmpl
var reportTemplate string

// reportTmpl is the parsed report.html template.
var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"cls":   outcomeClass,
	"first": firstLine,
	"slug":  outcomeSlug,
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
// directory if needed, and the compiled-in CONTRACT.md beside it
// (ContractFile), so the page's links to the contract resolve.
func WriteHTML(path string, res Results) error {
	raw, err := RenderHTML(res)
	if err != nil {
		return fmt.Errorf("reports: render %s: %w", path, err)
	}
	if err := writeFileAtomic(path, raw); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(filepath.Dir(path), ContractFile), contract.Markdown())
}

// ContractFile is the contract beside report.html and in a bundle: the
// compiled-in copy of ../shared/spec/CONTRACT.md (internal/contract).
const ContractFile = contract.FileName

// RenderHTML renders res as one self-contained HTML page (inline CSS, JS
// and SVG; a Content-Security-Policy that forbids any network access):
//
//   - a verdict banner per level (id "verdict-<level>") and one for the run
//     (id "verdict"), and the certificate when there is one;
//   - the rule table, one row per distinct rule (the test list's count):
//     rule ID (a link to its contract text further down, id
//     "contract-<RULE>", and to its section of CONTRACT.md, shipped beside
//     the page), level, outcome, cases, message, and the rule's sentence
//     with its whole contract text expandable; a rule checked again at a
//     higher level (every Core and Lifecycle rule "under faults") gets a
//     sub-row under its own row, class "rerun", not a row of its own. Each
//     row has id "rule-<level>-<RULE>" and class "outcome-<outcome>";
//   - every case with its outcome and reason, filterable by outcome in the
//     page (id "cases"; rows carry data-outcome);
//   - the handoff latency per topology on a log scale, and over the run's
//     time (LatencyHistogramSVGs, LatencyTimelineSVGs);
//   - for each failed or error case: its message (harness source locations
//     removed: PublicMessage), the reproduce command (ReproduceCommand) and
//     its redacted request/response transcript;
//   - the run's metadata, GPU inventory and redacted configuration;
//   - the contract text of each rule (id "contract-<RULE>", from the
//     compiled-in CONTRACT.md, internal/contract), linking to its section
//     of CONTRACT.md.
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

// outcomeSlug is an outcome as one word ("not-applicable").
func outcomeSlug(o Outcome) string { return strings.ReplaceAll(string(o), " ", "-") }

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

// htmlRule is one row of the rule table: a rule at one level.
type htmlRule struct {
	RuleResult
	ContractID string
	// Rerun: a sub-row, the rule checked again at Level (Under says how:
	// "under faults").
	Rerun bool
	Under string
	// Sub are the re-run rows under a rule's own row.
	Sub []htmlRule
	// Text is the rule's whole contract entry, rendered; Sentence its first
	// sentence (the requirement), rendered.
	Text     template.HTML
	Sentence template.HTML
	Message  string
}

type htmlFailure struct {
	CaseResult
	ID        string
	Reproduce string
	Public    string
}

// htmlCase is one row of the case table.
type htmlCase struct {
	CaseResult
	Reason   string
	Failure  string // the id of its failure entry, "" for none
	UnderTag string
}

type htmlContract struct {
	Rule, Level, ID, Requirement, Href, Section string
	Text                                        template.HTML
}

type htmlView struct {
	R            Results
	CSP          string
	Title        string
	Banners      []htmlBanner
	Rules        []htmlRule
	RuleCount    int
	RerunCount   int
	RuleCounts   []string
	Cases        []htmlCase
	CaseFilters  []htmlFilter
	Failures     []htmlFailure
	Plots        []template.HTML
	Timelines    []template.HTML
	ConfigYAML   string
	Contract     []htmlContract
	LevelsText   string
	CasesByOut   []string
	HasLatencies bool
}

// htmlFilter is one outcome checkbox of the case table.
type htmlFilter struct {
	Outcome Outcome
	Count   int
}

// underLabel says how a rule's row at level re-runs a rule whose own
// level is home: "under faults" (CONTRACT section 5: every Core and
// Lifecycle rule again under injected faults), else "at <level>".
func underLabel(home, level string) string {
	if level == "faults" && home != "faults" {
		return "under faults"
	}
	return "at " + level
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
	texts := contract.Rules()
	home := map[string]int{} // rule -> index of its own row in v.Rules
	verdict := map[string]Outcome{}
	var order []string
	for _, r := range res.Rules {
		row := htmlRule{RuleResult: r, ContractID: "contract-" + r.Rule, Message: firstLine(PublicMessage(r.Message))}
		sentence := r.Requirement
		if t, ok := texts[r.Rule]; ok {
			row.Text, sentence = markdownInline(t.Text), t.Sentence
		}
		row.Sentence = markdownInline(sentence)
		verdict[r.Rule] = Worst(verdict[r.Rule], r.Outcome)
		if i, ok := home[r.Rule]; ok {
			row.Rerun, row.Under = true, underLabel(v.Rules[i].Level, r.Level)
			v.Rules[i].Sub = append(v.Rules[i].Sub, row)
			v.RerunCount++
			continue
		}
		home[r.Rule] = len(v.Rules)
		order = append(order, r.Rule)
		v.Rules = append(v.Rules, row)
		c := htmlContract{Rule: r.Rule, Level: r.Level, ID: "contract-" + r.Rule, Requirement: sentence, Href: r.Contract, Text: row.Text}
		if i := strings.IndexByte(r.Contract, '#'); i >= 0 {
			c.Section = r.Contract[i+1:]
		}
		v.Contract = append(v.Contract, c)
	}
	v.RuleCount = len(v.Rules)
	n := map[Outcome]int{}
	for _, r := range order {
		n[verdict[r]]++
	}
	for _, o := range []Outcome{Passed, Failed, Error, NotApplicable, NotVerifiable} {
		if n[o] > 0 {
			v.RuleCounts = append(v.RuleCounts, fmt.Sprintf("%d %s", n[o], o))
		}
	}
	failureOf := map[int]string{}
	for i, c := range res.Cases {
		if c.Outcome != Failed && c.Outcome != Error {
			continue
		}
		f := htmlFailure{CaseResult: c, ID: fmt.Sprintf("case-%d", i), Public: PublicMessage(c.Message)}
		if c.Rule != "" {
			f.Reproduce = ReproduceCommand(res, c.Rule)
		}
		failureOf[i] = f.ID
		v.Failures = append(v.Failures, f)
	}
	caseCount := map[Outcome]int{}
	for i, c := range res.Cases {
		hc := htmlCase{CaseResult: c, Reason: firstLine(PublicMessage(c.Message)), Failure: failureOf[i]}
		if slices.Contains(c.Labels, labelUnderFaults) {
			hc.UnderTag = "under faults"
		}
		v.Cases = append(v.Cases, hc)
		caseCount[c.Outcome]++
	}
	for _, o := range []Outcome{Failed, Error, NotVerifiable, Passed, NotApplicable} {
		if caseCount[o] > 0 {
			v.CaseFilters = append(v.CaseFilters, htmlFilter{Outcome: o, Count: caseCount[o]})
		}
	}
	v.Plots = LatencyHistogramSVGs(res.HandoffLatency)
	v.Timelines = LatencyTimelineSVGs(res.HandoffLatency)
	v.ConfigYAML = configYAML(res.Config)
	outs := make([]Outcome, 0, len(caseCount))
	for o := range caseCount {
		outs = append(outs, o)
	}
	sort.Slice(outs, func(i, j int) bool { return severity(outs[i]) > severity(outs[j]) })
	for _, o := range outs {
		v.CasesByOut = append(v.CasesByOut, fmt.Sprintf("%d %s", caseCount[o], o))
	}
	return v
}

// labelUnderFaults is the label of a Core or Lifecycle case run again at
// the Faults level (conformance/suite's LabelUnderFaults).
const labelUnderFaults = "under-faults"

// harnessLocation matches a Go source location ("suite/su.go:120",
// "/home/ci/baton/conformance/suite/su.go:120 +0x1d").
var harnessLocation = regexp.MustCompile(`(?:[\w.@~-]*/)*[\w.-]+\.go:\d+(?: \+0x[0-9a-f]+)?`)

// locationLine matches a line that only says where: "at suite/su.go:120",
// a stack frame's file line.
var locationLine = regexp.MustCompile(`^\s*(?:at\s+)?(?:[\w.@~-]*/)*[\w.-]+\.go:\d+(?: \+0x[0-9a-f]+)?\s*$`)

// PublicMessage is a case message as report.html shows it: without the
// harness's source locations (the "at suite/su.go:120" line Ginkgo adds,
// stack frames' file lines, paths inside other lines), which say where in
// baton a check failed, not what the target did.
func PublicMessage(msg string) string {
	lines := strings.Split(msg, "\n")
	out := lines[:0]
	for _, l := range lines {
		if locationLine.MatchString(l) {
			continue
		}
		out = append(out, strings.TrimRight(harnessLocation.ReplaceAllString(l, ""), " "))
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n ")
}

// markdownCode and markdownBold are the inline markdown of a rule entry.
var (
	markdownCode = regexp.MustCompile("`([^`]+)`")
	markdownBold = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

// markdownInline renders a rule entry's text: escaped, `code` and
// **bold** kept.
func markdownInline(md string) template.HTML {
	s := template.HTMLEscapeString(md)
	s = markdownCode.ReplaceAllString(s, "<code>$1</code>")
	s = markdownBold.ReplaceAllString(s, "<b>$1</b>")
	return template.HTML(s)
}
