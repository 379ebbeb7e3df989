package reports

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// ErrBundleRejected is wrapped by the error of VerifyBundle when a bundle
// is incomplete, altered, from an unsupported version, or does not certify
// its claimed level.
var ErrBundleRejected = errors.New("reports: bundle rejected")

// SupportedSpecRevisions are the contract revisions this baton verifies.
var SupportedSpecRevisions = []string{"baton.encoder.v1"}

// VerifyOptions say what a bundle must certify.
type VerifyOptions struct {
	// RulesByLevel is the level table (CONTRACT section 5): level ("core")
	// to the rule IDs a claim of that level must show passed (or not
	// applicable). Required.
	RulesByLevel map[string][]string
	// SpecRevisions are the accepted Results.SpecRevision values
	// (SupportedSpecRevisions when nil).
	SpecRevisions []string
}

// BundleError lists every problem VerifyBundle found, one per line; it
// wraps ErrBundleRejected.
type BundleError struct {
	// Dir is the bundle directory.
	Dir string
	// Problems say what is wrong, e.g. "rule SU-3 (core) failed: ...",
	// "results.yaml: SHA-256 3f2a... does not match SHA256SUMS (9b1c...)".
	Problems []string
}

// Error implements error.
func (e *BundleError) Error() string {
	return fmt.Sprintf("bundle %s rejected:\n  %s", e.Dir, strings.Join(e.Problems, "\n  "))
}

// Unwrap makes errors.Is(err, ErrBundleRejected) true.
func (e *BundleError) Unwrap() error { return ErrBundleRejected }

// VerifyBundle re-checks a certification bundle written by WriteBundle, the
// way a submission bot does, and returns its PRODUCT.yaml. It checks that:
//
//   - the bundle is complete: every file of BundleFiles is present;
//   - SHA256SUMS is well formed, lists every other file of the directory
//     (nothing unlisted, nothing missing) and every hash matches;
//   - PRODUCT.yaml has a supported format and results.yaml a supported
//     spec revision and a baton version;
//   - the results carry an issued certificate for the level PRODUCT.yaml
//     claims, and PRODUCT.yaml agrees with them (level, certified,
//     topologies, backends, baton version);
//   - every rule of opts.RulesByLevel for the claimed level and the levels
//     below it is present in results.yaml and passed (or is not
//     applicable), and at least one rule of each such level passed;
//   - junit.xml parses and reports no failure and no error.
//
// The error is a *BundleError listing every problem (wrapping
// ErrBundleRejected), or a plain error when dir cannot be read at all.
func VerifyBundle(dir string, opts VerifyOptions) (Product, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return Product{}, fmt.Errorf("reports: bundle: %w", err)
	}
	if !st.IsDir() {
		return Product{}, fmt.Errorf("reports: bundle: %s is not a directory", dir)
	}
	v := &bundleCheck{dir: dir}
	v.files()
	p, havePro := v.product()
	res, haveRes := v.results(opts)
	if havePro && haveRes {
		v.certificate(p, res, opts)
	}
	v.junit()
	if len(v.problems) > 0 {
		return p, &BundleError{Dir: dir, Problems: v.problems}
	}
	return p, nil
}

type bundleCheck struct {
	dir      string
	problems []string
}

func (v *bundleCheck) fail(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

func (v *bundleCheck) path(name string) string { return filepath.Join(v.dir, name) }

// files checks completeness and SHA256SUMS.
func (v *bundleCheck) files() {
	present := map[string]bool{}
	entries, err := os.ReadDir(v.dir)
	if err != nil {
		v.fail("cannot list the bundle: %v", err)
		return
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			v.fail("%s is not a regular file (a bundle is one flat directory)", e.Name())
			continue
		}
		present[e.Name()] = true
	}
	for _, f := range BundleFiles {
		if !present[f] {
			v.fail("incomplete: %s is missing", f)
		}
	}
	if !present[SumsFile] {
		return
	}
	raw, err := os.ReadFile(v.path(SumsFile))
	if err != nil {
		v.fail("%s: %v", SumsFile, err)
		return
	}
	sums, err := ParseSums(raw)
	if err != nil {
		v.fail("%v", err)
		return
	}
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if n == SumsFile {
			v.fail("%s lists itself", SumsFile)
			continue
		}
		if !present[n] {
			v.fail("%s lists %s, which is missing", SumsFile, n)
			continue
		}
		got, err := FileSHA256(v.path(n))
		if err != nil {
			v.fail("%s: %v", n, err)
			continue
		}
		if got != sums[n] {
			v.fail("%s: SHA-256 %s does not match %s (%s): the file was changed after the run", n, short(got), SumsFile, short(sums[n]))
		}
	}
	var unlisted []string
	for n := range present {
		if _, ok := sums[n]; !ok && n != SumsFile {
			unlisted = append(unlisted, n)
		}
	}
	sort.Strings(unlisted)
	for _, n := range unlisted {
		v.fail("%s is not covered by %s", n, SumsFile)
	}
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12] + ".."
	}
	return sum
}

// product reads PRODUCT.yaml.
func (v *bundleCheck) product() (Product, bool) {
	raw, err := os.ReadFile(v.path(ProductFile))
	if err != nil {
		return Product{}, false // reported as missing by files
	}
	p, err := ParseProduct(raw)
	if err != nil {
		v.fail("%v", err)
		return Product{}, false
	}
	if p.Format != BundleFormat {
		v.fail("%s: unsupported bundle format %q (this baton reads %q)", ProductFile, p.Format, BundleFormat)
	}
	return p, true
}

// results reads results.yaml and checks its versions.
func (v *bundleCheck) results(opts VerifyOptions) (Results, bool) {
	raw, err := os.ReadFile(v.path(ResultsYAMLFile))
	if err != nil {
		return Results{}, false
	}
	res, err := ParseYAML(raw)
	if err != nil {
		v.fail("%s: %v", ResultsYAMLFile, err)
		return Results{}, false
	}
	revs := opts.SpecRevisions
	if revs == nil {
		revs = SupportedSpecRevisions
	}
	if !slices.Contains(revs, res.SpecRevision) {
		v.fail("%s: unsupported spec revision %q (this baton verifies %s)", ResultsYAMLFile, res.SpecRevision, strings.Join(revs, ", "))
	}
	if strings.TrimSpace(res.BatonVersion) == "" {
		v.fail("%s: no baton_version", ResultsYAMLFile)
	}
	return res, true
}

// certificate checks the claim against the level table.
func (v *bundleCheck) certificate(p Product, res Results, opts VerifyOptions) {
	c := res.Certificate
	if c == nil {
		v.fail("%s: no certificate (the run was not made with --certify)", ResultsYAMLFile)
		return
	}
	if !c.Issued {
		v.fail("certificate refused for level %s", c.Level)
	}
	if !p.Certified {
		v.fail("%s: certified: false", ProductFile)
	}
	if p.Level != c.Level {
		v.fail("%s claims level %q but the certificate in %s is for %q", ProductFile, p.Level, ResultsYAMLFile, c.Level)
	}
	if p.Certified != c.Issued || !slices.Equal(p.Topologies, c.Topologies) || !slices.Equal(p.Backends, c.Backends) {
		v.fail("%s disagrees with the certificate in %s (certified %v/%v, topologies %v/%v, backends %v/%v)",
			ProductFile, ResultsYAMLFile, p.Certified, c.Issued, p.Topologies, c.Topologies, p.Backends, c.Backends)
	}
	if p.BatonVersion != res.BatonVersion || p.SpecRevision != res.SpecRevision {
		v.fail("%s names baton %s / %s but %s was written by %s / %s", ProductFile, p.BatonVersion, p.SpecRevision, ResultsYAMLFile, res.BatonVersion, res.SpecRevision)
	}
	if len(c.Topologies) == 0 {
		v.fail("the certificate covers no topology")
	}
	idx := slices.Index(knownLevels, c.Level)
	if idx < 0 {
		v.fail("unknown level %q (want core, lifecycle or faults)", c.Level)
		return
	}
	if len(opts.RulesByLevel) == 0 {
		v.fail("no level table to verify against (harness bug)")
		return
	}
	byKey := map[[2]string]RuleResult{}
	for _, r := range res.Rules {
		byKey[[2]string{r.Level, r.Rule}] = r
	}
	for _, l := range knownLevels[:idx+1] {
		required := opts.RulesByLevel[l]
		passed := 0
		for _, rule := range required {
			r, ok := byKey[[2]string{l, rule}]
			switch {
			case !ok:
				v.fail("rule %s (%s) is missing from %s", rule, l, ResultsYAMLFile)
			case r.Outcome == Passed:
				passed++
			case r.Outcome == NotApplicable:
			default:
				msg := firstLine(r.Message)
				if msg == "" {
					msg = "no message"
				}
				v.fail("rule %s (%s) %s: %s", rule, l, r.Outcome, msg)
			}
		}
		if len(required) > 0 && passed == 0 {
			v.fail("no rule of level %s passed", l)
		}
	}
	for _, cr := range res.Cases {
		if cr.Rule == "" && cr.Outcome != Passed && cr.Outcome != NotApplicable {
			v.fail("%s %s: %s", cr.Name, cr.Outcome, firstLine(cr.Message))
		}
	}
}

// junit checks junit.xml parses and shows no failure or error.
func (v *bundleCheck) junit() {
	raw, err := os.ReadFile(v.path(JUnitXMLFile))
	if err != nil {
		return
	}
	var doc struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Errors   int      `xml:"errors,attr"`
	}
	if err := xml.NewDecoder(bytes.NewReader(raw)).Decode(&doc); err != nil {
		v.fail("%s: %v", JUnitXMLFile, err)
		return
	}
	if doc.Tests == 0 {
		v.fail("%s holds no testcase", JUnitXMLFile)
	}
	if doc.Failures > 0 || doc.Errors > 0 {
		v.fail("%s reports %d failures and %d errors", JUnitXMLFile, doc.Failures, doc.Errors)
	}
}
