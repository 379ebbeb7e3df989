package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/testlist"
	"github.com/baton-dev/baton/reports"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/formatter"
	"github.com/onsi/ginkgo/v2/types"
)

// Tool is Results.Tool for runs made by Run.
const Tool = "baton check"

// SpecRevision is Results.SpecRevision: the contract profile the suite
// certifies (WIRE.md "Extension (ours)").
const SpecRevision = testlist.SpecRevision

// SuiteDescription is the description Run passes to ginkgo.RunSpecs.
const SuiteDescription = "baton conformance"

// Files Run writes under Options.ReportDir.
const (
	// GinkgoJSONFile is Ginkgo's own JSON report ([]types.Report).
	GinkgoJSONFile = "ginkgo.json"
	// GinkgoJUnitFile is Ginkgo's own JUnit report.
	GinkgoJUnitFile = "ginkgo-junit.xml"
	// ResultsFile is baton's results (reports.WriteJSON).
	ResultsFile = "results.json"
	// JUnitFile is baton's JUnit report (reports.WriteJUnit).
	JUnitFile = "junit.xml"
	// ResultsYAMLFile is the same results as YAML (reports.WriteYAML).
	ResultsYAMLFile = reports.ResultsYAMLFile
	// ReportHTMLFile is the self-contained HTML report (reports.WriteHTML).
	ReportHTMLFile = reports.ReportHTMLFile
)

// ErrAlreadyRan is returned by a second Run in one process: Ginkgo runs its
// suite once per process. Start another process for another run.
var ErrAlreadyRan = errors.New("check: the conformance suite already ran in this process (Ginkgo allows one run per process)")

// ran is set by the first Run.
var ran atomic.Bool

// Options configures Run.
type Options struct {
	// LabelFilter is a Ginkgo label filter over the specs' labels: rule IDs
	// ("SU-2"), levels ("level:core"), and the suite's extra labels
	// ("topology:E+PD", "slow", "destructive"); "" runs every case of the
	// levels the profile claims (cases of higher levels never run:
	// ClaimedFilter). The report covers only the rules it selects
	// (SelectRules): a run filtered to one rule reports only that rule.
	LabelFilter string
	// ReportDir receives ginkgo.json, ginkgo-junit.xml, results.json and
	// junit.xml (created if missing). "" keeps no files: Ginkgo's JSON
	// report goes to a temporary directory that Run removes.
	ReportDir string
	// CaseTimeout, when non-zero, bounds each case instead of the profile's
	// case_timeout (Profile.CaseTimeout); at most target.MaxCaseTimeout.
	CaseTimeout time.Duration
	// GPU is the GPU inventory of the machine running the check (cmd/baton
	// reads it through NVML); it is stamped into the results.
	GPU []reports.GPUDevice
	// Progress, when set, is told the number of selected cases, each case's
	// outcome as it ends, and the end of the run (internal/progress: a bar
	// on a terminal, periodic lines in CI).
	Progress Progress
	// Out receives Ginkgo's succinct progress and, at the end, one line per
	// rule and a summary line; nil discards all output.
	Out io.Writer
	// Certify makes the run a certification run (`baton check --certify`):
	// Run refuses to start (ErrCannotCertify) unless the profile can verify
	// every rule of its claimed level (Plan.CertifyProblems, which also
	// forbids a label filter), and the results carry the certificate
	// (reports.IssueCertificate).
	Certify bool
	// ConfigPath is the profile file as the user named it (for the
	// reproduce commands of the report); "" when built in memory.
	ConfigPath string
	// Config is the profile with secrets removed (reports.RedactConfig),
	// recorded in the results.
	Config map[string]any
	// Command is the command line of the run, shell-quoted, recorded in
	// the results and the bundle's README.
	Command string
}

// Run runs the conformance suite once, in this process, against tg, and
// returns its results (also written under opts.ReportDir). Call Probe first.
//
// It calls suite.SetTarget(tg) with every engine wrapped in a Recorder,
// then ginkgo.RunSpecs with the suite configuration of
// ginkgo.GinkgoConfiguration() (so -ginkgo.* flags still apply) with
// opts.LabelFilter and specs in their written order, and Ginkgo's own JSON
// and JUnit reports in opts.ReportDir. It reads the JSON report back,
// converts it (CasesFromReports), summarizes it over the rules the filter
// selects (SelectRules, reports.Summarize), adds each rule's requirement
// from the test list (testlist.Committed), each failed or error case's
// transcript, the handoff latencies, the run's metadata and, with
// opts.Certify, the certificate; writes results.json, results.yaml,
// junit.xml and report.html, and prints Results.Lines, Results.Summary and
// the certificate line to opts.Out.
//
// A deadline on ctx bounds the whole run (Ginkgo's suite timeout; cases
// that did not start by then are errors). Cancelling ctx without a deadline
// does not stop a run in progress; Ginkgo stops on SIGINT/SIGTERM.
//
// Errors: ErrAlreadyRan on a second call; an invalid label filter;
// ErrCannotCertify (wrapped, listing each rule that cannot be verified)
// for a certification run the profile cannot support, before anything
// runs; a report that cannot be written or read back. A failing target is not an
// error: it is in the Results (reports.ExitCode).
func Run(ctx context.Context, tg target.Target, opts Options) (reports.Results, error) {
	if tg == nil {
		return reports.Results{}, errors.New("check: nil target")
	}
	if err := ctx.Err(); err != nil {
		return reports.Results{}, fmt.Errorf("check: %w", err)
	}
	if _, err := types.ParseLabelFilter(opts.LabelFilter); err != nil {
		// Ginkgo would os.Exit on it; report it instead.
		return reports.Results{}, fmt.Errorf("check: label filter %q: %w", opts.LabelFilter, err)
	}
	if opts.CaseTimeout < 0 {
		return reports.Results{}, fmt.Errorf("check: case timeout %v is negative", opts.CaseTimeout)
	}
	if opts.CaseTimeout > target.MaxCaseTimeout {
		return reports.Results{}, fmt.Errorf("check: case timeout %v is longer than %v (the bound is what turns a hung target into a verdict)", opts.CaseTimeout, target.MaxCaseTimeout)
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	if opts.Certify {
		plan, err := NewPlan(tg.Profile(), RolesOf(tg), opts.LabelFilter)
		if err != nil {
			return reports.Results{}, err
		}
		if problems := plan.CertifyProblems(); len(problems) > 0 {
			return reports.Results{}, CertifyError(plan, problems)
		}
	}
	list, err := testlist.Committed()
	if err != nil {
		return reports.Results{}, fmt.Errorf("check: the compiled-in test list: %w", err)
	}
	reportDir, cleanup, err := prepareReportDir(opts.ReportDir)
	if err != nil {
		return reports.Results{}, err
	}
	defer cleanup()
	if !ran.CompareAndSwap(false, true) {
		return reports.Results{}, ErrAlreadyRan
	}

	profile := tg.Profile()
	rec := NewRecorder(currentCase, time.Now)
	g := newGuard(tg, suiteDeclared())
	g.start(ctx)
	activeGuard.Store(g)
	defer activeGuard.Store(nil)
	engines := Identities(ctx, tg) // before any case may take an endpoint down
	suite.SetTarget(wrapTarget(tg, opts.CaseTimeout, rec, g, engines))

	suiteConfig, reporterConfig := ginkgo.GinkgoConfiguration()
	// Only the cases of the claimed levels run (CONTRACT section 5: the
	// report covers the levels the profile claims).
	profileLevels, ok := profile.ClaimedLevels()
	if !ok {
		return reports.Results{}, fmt.Errorf("check: profile claims unknown level %q", profile.Level)
	}
	// The cases of a feature the profile does not declare never run (SE-1, SE-2).
	suiteConfig.LabelFilter = suite.FeatureFilter(ClaimedFilter(profileLevels, opts.LabelFilter), profile)
	suiteConfig.RandomizeAllSpecs = false // destructive cases run last: keep the written order
	suiteConfig.ParallelProcess, suiteConfig.ParallelTotal = 1, 1
	if deadline, ok := ctx.Deadline(); ok {
		suiteConfig.Timeout = time.Until(deadline)
	}
	reporterConfig.Succinct = true
	reporterConfig.Verbose, reporterConfig.VeryVerbose = false, false
	reporterConfig.SilenceSkips = true // not applicable / not verifiable are in the rule lines
	reporterConfig.NoColor = reporterConfig.NoColor || !isTerminal(out)
	ginkgoJSON := filepath.Join(reportDir, GinkgoJSONFile)
	reporterConfig.JSONReport = ginkgoJSON
	if opts.ReportDir != "" {
		reporterConfig.JUnitReport = filepath.Join(reportDir, GinkgoJUnitFile)
	}

	if opts.Progress != nil {
		opts.Progress.Start(countSelected(suiteConfig.LabelFilter))
		activeProgress.Store(&progressSink{opts.Progress}) // each case's adjusted outcome (availability.go)
		defer func() {
			activeProgress.Store(nil)
			opts.Progress.Finish()
		}()
	}
	started := time.Now()
	// Ginkgo's default reporter writes to formatter.ColorableStdOut; point it
	// at out for the run.
	func() {
		saved := formatter.ColorableStdOut
		formatter.ColorableStdOut = out
		defer func() { formatter.ColorableStdOut = saved }()
		ginkgo.RunSpecs(&testingT{}, SuiteDescription, suiteConfig, reporterConfig)
	}()
	elapsed := time.Since(started)

	ginkgoReports, err := readGinkgoJSON(ginkgoJSON)
	if err != nil {
		return reports.Results{}, err
	}
	var specs []types.SpecReport
	for _, r := range ginkgoReports {
		specs = append(specs, r.SpecReports...)
	}
	// The report covers the levels the profile claims (CONTRACT section 5).
	claimed, ok := profile.ClaimedLevels()
	if !ok {
		return reports.Results{}, fmt.Errorf("check: profile claims unknown level %q", profile.Level)
	}
	levels := map[string][]string{}
	for l, rules := range suite.RulesByLevel() {
		name := strings.ToLower(fmt.Sprint(l))
		if slices.Contains(claimed, name) {
			levels[name] = rules
		}
	}
	levels = suite.RulesForProfile(levels, profile) // the feature rules the profile declares (SE-1, SE-2)
	levels, err = SelectRules(levels, specs, opts.LabelFilter)
	if err != nil {
		return reports.Results{}, err
	}

	res := reports.Summarize(g.apply(CasesFromReports(ginkgoReports)), levels)
	res.Tool = Tool
	res.BatonVersion, res.BatonCommit = BatonVersion(), BatonCommit()
	res.SpecRevision = SpecRevision
	res.Target = profile.Name
	if impl := profile.Implementation; impl != (target.Implementation{}) {
		res.Implementation = &reports.Implementation{Vendor: impl.Vendor, Product: impl.Product, Version: impl.Version, Contact: impl.Contact}
	}
	res.Command, res.ConfigPath, res.Config = opts.Command, opts.ConfigPath, opts.Config
	res.ClaimedLevel = claimed[len(claimed)-1]
	res.Topologies = append([]string(nil), profile.Topologies...)
	res.Backends = append([]string(nil), profile.Backends...)
	res.StartedAt = started.UTC()
	res.DurationMs = elapsed.Milliseconds()
	res.LabelFilter = opts.LabelFilter
	res.GPU = append([]reports.GPUDevice{}, opts.GPU...)
	res.Engines = engines
	AddRequirements(&res, list)
	for i, c := range res.Cases {
		if c.Outcome == reports.Failed || c.Outcome == reports.Error {
			res.Cases[i].Transcript, res.Cases[i].TranscriptDroppedCalls = rec.Transcript(c.Name)
		}
		res.Cases[i].Backends = rec.Backends(c.Name)
	}
	res.HandoffLatency = rec.Latencies()
	if strings.TrimSpace(opts.LabelFilter) != "" {
		// A filtered run checked only some rules of its levels: it reports
		// them, but claims no level.
		res.WithholdLevels(reports.NoLevelVerdictFiltered)
	}
	if opts.Certify {
		c := reports.IssueCertificate(res, claimed, profile.Topologies, profile.Backends, FeatureRules()...)
		res.Certificate = &c
	}

	if opts.ReportDir != "" {
		if err := WriteReports(reportDir, res); err != nil {
			return res, err
		}
	}
	fmt.Fprintln(out)
	for _, l := range res.Lines() {
		fmt.Fprintln(out, l)
	}
	fmt.Fprintln(out, res.Summary())
	if res.Certificate != nil {
		fmt.Fprintln(out, res.Certificate.Line())
	}
	return res, nil
}

// FeatureRules are the suite's feature rules (suite.FeatureRules) as the
// certificate takes them: a certificate lists each security feature whose
// rule passed (CONTRACT section 5).
func FeatureRules() []reports.FeatureRule {
	var out []reports.FeatureRule
	for _, f := range suite.FeatureRules() {
		out = append(out, reports.FeatureRule{Rule: f.Rule, Feature: f.Feature})
	}
	return out
}

// ClaimedFilter is the Ginkgo label filter a run uses: the cases of the
// claimed levels ("level:core || level:lifecycle"), and of those only the
// ones filter selects ("(level:core) && (SU-2 || L-6)").
func ClaimedFilter(levels []string, filter string) string {
	parts := make([]string, len(levels))
	for i, l := range levels {
		parts[i] = LevelLabelPrefix + l
	}
	f := strings.Join(parts, " || ")
	if strings.TrimSpace(filter) != "" {
		f = "(" + f + ") && (" + filter + ")"
	}
	return f
}

// WriteReports writes every report of res into dir from the one results
// value: results.json, results.yaml, junit.xml and report.html.
func WriteReports(dir string, res reports.Results) error {
	if err := reports.WriteJSON(filepath.Join(dir, ResultsFile), res); err != nil {
		return err
	}
	if err := reports.WriteYAML(filepath.Join(dir, ResultsYAMLFile), res); err != nil {
		return err
	}
	if err := reports.WriteJUnit(filepath.Join(dir, JUnitFile), res); err != nil {
		return err
	}
	return reports.WriteHTML(filepath.Join(dir, ReportHTMLFile), res)
}

// AddRequirements sets each rule's requirement sentence and contract link
// from the test list (rules the list lacks keep none).
func AddRequirements(res *reports.Results, list testlist.List) {
	for i, r := range res.Rules {
		if lr, ok := list.Rule(r.Rule); ok {
			res.Rules[i].Requirement = lr.Requirement
			res.Rules[i].Contract = lr.ContractRef()
		}
	}
}

// CertifyError is the error of a refused certification run: it wraps
// ErrCannotCertify and lists each problem of the plan on its own line.
func CertifyError(plan Plan, problems []string) error {
	return fmt.Errorf("%w %s (profile %q):\n  %s", ErrCannotCertify, plan.Levels[len(plan.Levels)-1], plan.Profile.Name, strings.Join(problems, "\n  "))
}

// currentCase is the Recorder's key: the name and labels of the Ginkgo spec
// running now ("" outside a spec).
func currentCase() (string, []string) {
	sr := ginkgo.CurrentSpecReport()
	if !sr.LeafNodeType.Is(types.NodeTypeIt) {
		return "", nil
	}
	return caseName(sr), sr.Labels()
}

// prepareReportDir returns the absolute report directory, creating it, or a
// temporary one (removed by cleanup) when dir is "".
func prepareReportDir(dir string) (abs string, cleanup func(), err error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "baton-check-*")
		if err != nil {
			return "", nil, fmt.Errorf("check: report directory: %w", err)
		}
		return tmp, func() { os.RemoveAll(tmp) }, nil
	}
	abs, err = filepath.Abs(dir)
	if err != nil {
		return "", nil, fmt.Errorf("check: report directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", nil, fmt.Errorf("check: report directory: %w", err)
	}
	return abs, func() {}, nil
}

// readGinkgoJSON reads the Ginkgo JSON report written by the run.
func readGinkgoJSON(path string) ([]types.Report, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("check: read Ginkgo report: %w", err)
	}
	return ParseGinkgoJSON(raw)
}

// ParseGinkgoJSON decodes a Ginkgo JSON report (a JSON array of
// types.Report, as written by --json-report). Anything else is an error.
func ParseGinkgoJSON(raw []byte) ([]types.Report, error) {
	var rs []types.Report
	if err := json.Unmarshal(raw, &rs); err != nil {
		return nil, fmt.Errorf("check: parse Ginkgo report: %w", err)
	}
	if rs == nil {
		return nil, errors.New("check: parse Ginkgo report: not a JSON array of suite reports")
	}
	return rs, nil
}

// testingT is the GinkgoTestingT RunSpecs needs; the verdict comes from the
// report, so it only remembers that the suite failed.
type testingT struct{ failed atomic.Bool }

// Fail implements ginkgo.GinkgoTestingT.
func (t *testingT) Fail() { t.failed.Store(true) }

// isTerminal reports whether w is a character device (colour is kept only
// there; files and pipes get plain text).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// BatonVersion is the main module's version from the build info
// ("(devel)" for a source build, "unknown" when there is none).
func BatonVersion() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "unknown"
}

// BatonCommit is the VCS revision of the build ("-dirty" appended for a
// modified tree), or "unknown" (test binaries, builds outside a checkout).
func BatonCommit() string {
	if buildCommit != "" {
		return buildCommit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// Progress is what Run reports a run's progress to.
type Progress interface {
	Start(total int)
	Done(caseName, outcome string)
	Finish()
}

// countSelected is the number of registered cases a label filter selects.
func countSelected(filter string) int {
	match, err := types.ParseLabelFilter(filter)
	if err != nil {
		return 0
	}
	n := 0
	for _, c := range suite.Cases() {
		labels := append([]string{c.Rule, "level:" + string(c.Level)}, c.Labels...)
		if match(labels) {
			n++
		}
	}
	return n
}

// buildVersion and buildCommit are stamped by the Makefile with -ldflags -X
// (the build info lacks the VCS revision where -buildvcs=false is set).
var buildVersion, buildCommit string
