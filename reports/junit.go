package reports

import (
	"encoding/xml"
	"fmt"
	"strings"
)

// HarnessClassname is the JUnit classname of a rule-less (harness-level)
// case, such as a failed BeforeSuite.
const HarnessClassname = "harness"

// The JUnit shapes written by WriteJUnit (the common Jenkins/Surefire schema
// that CI systems read).
type junitTestSuites struct {
	XMLName  xml.Name         `xml:"testsuites"`
	Name     string           `xml:"name,attr"`
	Tests    int              `xml:"tests,attr"`
	Failures int              `xml:"failures,attr"`
	Errors   int              `xml:"errors,attr"`
	Skipped  int              `xml:"skipped,attr"`
	Time     string           `xml:"time,attr"`
	Suites   []junitTestSuite `xml:"testsuite"`
}

type junitTestSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitTestCase `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitTestCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes res to path as JUnit XML: one <testsuite> for the run
// (properties: tool, versions, target, label filter, level verdicts, overall
// verdict) with one <testcase> per case.
//
//   - name: the case name, starting with its rule ID (prefixed if the case's
//     own name does not); classname: the rule family ("SU" for SU-2), or
//     HarnessClassname for a rule-less case; time in seconds.
//   - failed: <failure message="first line" type="failed">full text</failure>;
//     error: <error ...> likewise; not applicable / not verifiable:
//     <skipped message="not applicable: reason"/>.
//   - a rule that no case checked (not verifiable, MissingRuleMessage) gets a
//     synthetic skipped testcase "RULE (no case checked this rule)", so it
//     is visible in CI instead of silently absent.
//
// Counts (tests, failures, errors, skipped) are set on both <testsuites> and
// <testsuite>. The directory of path is created if needed.
func WriteJUnit(path string, res Results) error {
	raw, err := marshalJUnit(res)
	if err != nil {
		return fmt.Errorf("reports: encode %s: %w", path, err)
	}
	return writeFileAtomic(path, raw)
}

func marshalJUnit(res Results) ([]byte, error) {
	suite := junitTestSuite{
		Name: "baton conformance",
		Time: seconds(res.DurationMs),
	}
	if res.Target != "" {
		suite.Name += ": " + res.Target
	}
	if !res.StartedAt.IsZero() {
		suite.Timestamp = res.StartedAt.UTC().Format("2006-01-02T15:04:05")
	}
	prop := func(name, value string) {
		suite.Properties = append(suite.Properties, junitProperty{Name: name, Value: value})
	}
	prop("tool", res.Tool)
	prop("baton_version", res.BatonVersion)
	prop("spec_revision", res.SpecRevision)
	prop("target", res.Target)
	prop("label_filter", res.LabelFilter)
	levels := make([]string, 0, len(res.Levels))
	for l := range res.Levels {
		levels = append(levels, l)
	}
	sortLevels(levels)
	for _, l := range levels {
		prop("level."+l, string(res.Levels[l]))
	}
	prop("verdict", string(res.Verdict))

	for _, c := range res.Cases {
		suite.Cases = append(suite.Cases, junitCase(c))
	}
	for _, r := range res.Rules {
		if r.Cases == 0 {
			suite.Cases = append(suite.Cases, junitCase(CaseResult{
				Rule:    r.Rule,
				Name:    r.Rule + " (" + MissingRuleMessage + ")",
				Level:   r.Level,
				Outcome: r.Outcome,
				Message: r.Message,
			}))
		}
	}
	for _, tc := range suite.Cases {
		suite.Tests++
		switch {
		case tc.Failure != nil:
			suite.Failures++
		case tc.Error != nil:
			suite.Errors++
		case tc.Skipped != nil:
			suite.Skipped++
		}
	}
	all := junitTestSuites{
		Name:     suite.Name,
		Tests:    suite.Tests,
		Failures: suite.Failures,
		Errors:   suite.Errors,
		Skipped:  suite.Skipped,
		Time:     suite.Time,
		Suites:   []junitTestSuite{suite},
	}
	raw, err := xml.MarshalIndent(all, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(raw, '\n')...), nil
}

// junitCase converts one case; the outcome decides the child element.
func junitCase(c CaseResult) junitTestCase {
	tc := junitTestCase{
		Name:      c.Name,
		Classname: RuleFamily(c.Rule),
		Time:      seconds(c.DurationMs),
	}
	if c.Rule != "" && !strings.HasPrefix(c.Name, c.Rule) {
		tc.Name = strings.TrimSpace(c.Rule + " " + c.Name)
	}
	if tc.Classname == "" {
		tc.Classname = c.Rule
	}
	if tc.Classname == "" {
		tc.Classname = HarnessClassname
	}
	switch c.Outcome {
	case Passed:
	case Failed:
		tc.Failure = &junitFailure{Message: firstLine(c.Message), Type: string(Failed), Text: c.Message}
	case NotApplicable, NotVerifiable:
		reason := c.Message
		if !strings.HasPrefix(reason, string(c.Outcome)) {
			reason = strings.TrimSuffix(string(c.Outcome)+": "+reason, ": ")
		}
		tc.Skipped = &junitSkipped{Message: reason}
	default: // Error, or an invalid outcome (which Summarize already turned into Error)
		tc.Error = &junitFailure{Message: firstLine(c.Message), Type: string(Error), Text: c.Message}
	}
	return tc
}

// seconds renders milliseconds as JUnit seconds ("1.250").
func seconds(ms int64) string {
	if ms < 0 {
		ms = 0
	}
	return fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
}

// firstLine returns the first non-empty line of s, trimmed.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
