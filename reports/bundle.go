package reports

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// BundleFormat names the layout of a certification bundle; PRODUCT.yaml
// carries it and VerifyBundle accepts only the formats it knows.
const BundleFormat = "baton.bundle/v1"

// Files of a certification bundle (WriteBundle, VerifyBundle).
const (
	ProductFile     = "PRODUCT.yaml"
	ReadmeFile      = "README.md"
	ResultsYAMLFile = "results.yaml"
	JUnitXMLFile    = "junit.xml"
	ReportHTMLFile  = "report.html"
)

// BundleFiles are the files every bundle holds; SHA256SUMS covers the
// others and any further file of the directory.
var BundleFiles = []string{ProductFile, ReadmeFile, ResultsYAMLFile, JUnitXMLFile, ReportHTMLFile, ContractFile, SumsFile}

// ErrNotCertificationRun: WriteBundle was given results without a
// Certificate (a run without --certify).
var ErrNotCertificationRun = errors.New("reports: a bundle needs the results of a certification run (--certify)")

// Product is PRODUCT.yaml: what was certified, at which level, by which
// baton, the way a conformance submission describes itself.
type Product struct {
	// Format is BundleFormat.
	Format string `yaml:"format" json:"format"`
	// Implementation is the vendor metadata of the target profile.
	Implementation Implementation `yaml:"implementation" json:"implementation"`
	// Target is the target profile's name.
	Target string `yaml:"target" json:"target"`
	// Level is the level claimed ("core").
	Level string `yaml:"level" json:"level"`
	// Certified is Certificate.Issued: every rule of the claimed level
	// passed or is not applicable.
	Certified bool `yaml:"certified" json:"certified"`
	// Verdict is the run's overall verdict.
	Verdict Outcome `yaml:"verdict" json:"verdict"`
	// Topologies and Backends are what the certificate covers.
	Topologies []string `yaml:"topologies" json:"topologies"`
	Backends   []string `yaml:"backends" json:"backends"` // covered: "shared_dir", "tcp", "cuda_ipc"
	// BatonVersion and BatonCommit identify the harness; SpecRevision the
	// contract ("baton.encoder.v1").
	BatonVersion string `yaml:"baton_version" json:"baton_version"`
	BatonCommit  string `yaml:"baton_commit" json:"baton_commit"`   // the harness build's commit
	SpecRevision string `yaml:"spec_revision" json:"spec_revision"` // "baton.encoder.v1"
	// Date is when the run started (RFC 3339, UTC).
	Date string `yaml:"date" json:"date"`
}

// ProductOf returns the PRODUCT.yaml of a certification run
// (ErrNotCertificationRun without a Certificate).
func ProductOf(res Results) (Product, error) {
	c := res.Certificate
	if c == nil {
		return Product{}, ErrNotCertificationRun
	}
	p := Product{
		Format:       BundleFormat,
		Target:       res.Target,
		Level:        c.Level,
		Certified:    c.Issued,
		Verdict:      res.Verdict,
		Topologies:   append([]string{}, c.Topologies...),
		Backends:     append([]string{}, c.Backends...),
		BatonVersion: res.BatonVersion,
		BatonCommit:  res.BatonCommit,
		SpecRevision: res.SpecRevision,
		Date:         res.StartedAt.UTC().Format(time.RFC3339),
	}
	if res.Implementation != nil {
		p.Implementation = *res.Implementation
	}
	return p, nil
}

// WriteBundle writes the certification bundle of res into dir (created if
// missing): PRODUCT.yaml (ProductOf), README.md (how to reproduce: the
// exact command, baton version, the redacted target profile),
// results.yaml, junit.xml, report.html, CONTRACT.md (the contract the run
// certified, which report.html's rule links point into), and last
// SHA256SUMS over every file of dir. res must come from a certification run
// (ErrNotCertificationRun); a refused certificate is still written, so a
// submission shows what failed, and VerifyBundle rejects it.
func WriteBundle(dir string, res Results) error {
	p, err := ProductOf(res)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("reports: bundle: %w", err)
	}
	if err := WriteYAML(filepath.Join(dir, ResultsYAMLFile), res); err != nil {
		return err
	}
	if err := WriteJUnit(filepath.Join(dir, JUnitXMLFile), res); err != nil {
		return err
	}
	if err := WriteHTML(filepath.Join(dir, ReportHTMLFile), res); err != nil {
		return err
	}
	raw, err := marshalProduct(p)
	if err != nil {
		return fmt.Errorf("reports: bundle: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, ProductFile), raw); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, ReadmeFile), []byte(bundleReadme(res, p))); err != nil {
		return err
	}
	return WriteSums(dir)
}

func marshalProduct(p Product) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# baton certification submission (see README.md; check with `baton report verify DIR`)\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ParseProduct decodes PRODUCT.yaml strictly (unknown keys are errors).
func ParseProduct(raw []byte) (Product, error) {
	var p Product
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return Product{}, fmt.Errorf("%s: %w", ProductFile, err)
	}
	return p, nil
}

// bundleReadme is README.md of a bundle.
func bundleReadme(res Results, p Product) string {
	var b strings.Builder
	title := res.Target
	if title == "" {
		title = "target"
	}
	fmt.Fprintf(&b, "# baton certification bundle: %s\n\n", title)
	fmt.Fprintf(&b, "%s.\n\n", strings.TrimPrefix(res.Certificate.Line(), "certificate: "))
	b.WriteString("| | |\n|---|---|\n")
	impl := strings.TrimSpace(strings.Join([]string{p.Implementation.Vendor, p.Implementation.Product, p.Implementation.Version}, " "))
	if p.Implementation.Contact != "" {
		impl += " (" + p.Implementation.Contact + ")"
	}
	if impl == "" {
		impl = "not declared (add `implementation:` to the target profile)"
	}
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, strings.ReplaceAll(v, "|", `\|`)) }
	row("implementation", impl)
	row("level claimed", p.Level)
	row("certified", fmt.Sprint(p.Certified))
	row("verdict", string(p.Verdict))
	levels := make([]string, 0, len(res.Levels))
	for l := range res.Levels {
		levels = append(levels, l)
	}
	sortLevels(levels)
	for _, l := range levels {
		row("level "+l, string(res.Levels[l]))
	}
	row("topologies covered", listText(p.Topologies))
	row("backends covered", listText(p.Backends))
	row("baton", fmt.Sprintf("%s (commit %s)", p.BatonVersion, p.BatonCommit))
	row("spec revision", p.SpecRevision)
	row("date", p.Date)
	b.WriteString("\n## How to reproduce\n\n")
	fmt.Fprintf(&b, "With baton %s (commit %s), run exactly:\n\n", p.BatonVersion, p.BatonCommit)
	cmd := res.Command
	if cmd == "" {
		cmd = "baton check --certify --config " + ShellQuote(configPathOr(res)) + " --bundle DIR"
	}
	fmt.Fprintf(&b, "```sh\n%s\n```\n\n", cmd)
	if res.ConfigPath != "" {
		fmt.Fprintf(&b, "with the target profile below saved as `%s` (fill in the secrets that were removed).", res.ConfigPath)
	} else {
		fmt.Fprintf(&b, "That command built the target profile below in memory. To check the same target by hand, save it as `%s` "+
			"(fill in any secrets that were removed) and run `baton check --certify --config %s --bundle DIR`.", DefaultConfigPath, DefaultConfigPath)
	}
	fmt.Fprintf(&b, " One rule at a time: `%s`.\n\n", ReproduceCommand(res, "SU-2"))
	b.WriteString("## Target profile (secrets removed)\n\n")
	if y := configYAML(res.Config); y != "" {
		fmt.Fprintf(&b, "```yaml\n%s```\n\n", y)
	} else {
		b.WriteString("Not recorded.\n\n")
	}
	if !res.Certificate.Issued {
		b.WriteString("## Why no certificate\n\n")
		for _, r := range res.Certificate.Reasons {
			fmt.Fprintf(&b, "- %s\n", r)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Files\n\n")
	b.WriteString("- `PRODUCT.yaml`: what was certified (implementation, level, topologies, backends, baton version)\n")
	b.WriteString("- `results.yaml`: every case and rule verdict, the run's metadata and the certificate\n")
	b.WriteString("- `junit.xml`: one testcase per case, rule ID in the name\n")
	b.WriteString("- `report.html`: the report for people (open it in a browser; it loads nothing from the network)\n")
	b.WriteString("- `CONTRACT.md`: the contract the run certified; report.html's rule links point into it\n")
	b.WriteString("- `SHA256SUMS`: `sha256sum -c SHA256SUMS`\n\n")
	b.WriteString("Check the whole bundle with `baton report verify DIR`.\n")
	return b.String()
}

func configPathOr(res Results) string {
	if res.ConfigPath != "" {
		return res.ConfigPath
	}
	return DefaultConfigPath
}
