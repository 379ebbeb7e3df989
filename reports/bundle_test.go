package reports_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-dev/baton/reports"
)

var verifyOpts = reports.VerifyOptions{RulesByLevel: coreRules}

// writeBundle writes res's bundle to a fresh directory.
func writeBundle(t *testing.T, res reports.Results) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := reports.WriteBundle(dir, res); err != nil {
		t.Fatalf("WriteBundle: %v", err)
	}
	return dir
}

func TestWriteBundleVerifies(t *testing.T) {
	dir := writeBundle(t, certRun(reports.Passed))
	for _, f := range reports.BundleFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("bundle lacks %s: %v", f, err)
		}
	}
	p, err := reports.VerifyBundle(dir, verifyOpts)
	if err != nil {
		t.Fatalf("VerifyBundle: %v", err)
	}
	if !p.Certified || p.Level != "core" || p.Implementation.Vendor != "Example Corp" || p.BatonVersion != "0.1.0" || p.Format != reports.BundleFormat {
		t.Errorf("PRODUCT.yaml = %+v", p)
	}
	readme, _ := os.ReadFile(filepath.Join(dir, reports.ReadmeFile))
	for _, want := range []string{"baton check --config target.yaml --certify --bundle out/bundle", "baton 0.1.0 (commit 0123456789abcdef)", "key_file: <redacted>", "topologies covered | E+PD", "sha256sum -c SHA256SUMS"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md lacks %q:\n%s", want, readme)
		}
	}
	// The checksum file is sha256sum's own format.
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "-c", "--quiet", reports.SumsFile)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, out)
		}
	}
}

func TestWriteBundleNeedsCertificationRun(t *testing.T) {
	res := certRun(reports.Passed)
	res.Certificate = nil
	if err := reports.WriteBundle(t.TempDir(), res); !errors.Is(err, reports.ErrNotCertificationRun) {
		t.Errorf("WriteBundle without a certificate = %v; want ErrNotCertificationRun", err)
	}
}

func TestVerifyBundleRejects(t *testing.T) {
	tests := []struct {
		name   string
		res    reports.Results
		change func(t *testing.T, dir string)
		opts   *reports.VerifyOptions
		want   []string // substrings of the error
	}{
		{name: "failed rule", res: certRun(reports.Failed),
			want: []string{"rule SU-3 (core) failed: Abort(ref=3f2a..) second call = ABORTED", "certificate refused for level core", "certified: false", "junit.xml reports 1 failures"}},
		{name: "not verifiable rule", res: certRun(reports.NotVerifiable), want: []string{"rule SU-3 (core) not verifiable"}},
		{name: "changed file", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) {
				appendTo(t, filepath.Join(dir, reports.ReportHTMLFile), "<!-- edited -->")
			},
			want: []string{"report.html: SHA-256", "does not match SHA256SUMS"}},
		{name: "missing file", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) { rm(t, filepath.Join(dir, reports.JUnitXMLFile)) },
			want:   []string{"incomplete: junit.xml is missing", "SHA256SUMS lists junit.xml, which is missing"}},
		{name: "missing SHA256SUMS", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) { rm(t, filepath.Join(dir, reports.SumsFile)) },
			want:   []string{"incomplete: SHA256SUMS is missing"}},
		{name: "unlisted file", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) { write(t, filepath.Join(dir, "extra.txt"), "x") },
			want:   []string{"extra.txt is not covered by SHA256SUMS"}},
		{name: "subdirectory", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) { os.Mkdir(filepath.Join(dir, "sub"), 0o755) },
			want:   []string{"sub is not a regular file"}},
		{name: "malformed SHA256SUMS", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, reports.SumsFile), "not a checksum line\n")
			},
			want: []string{"SHA256SUMS line 1"}},
		{name: "SHA256SUMS escapes the directory", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, reports.SumsFile), strings.Repeat("0", 64)+"  ../etc/passwd\n")
			},
			want: []string{"is not a file of the bundle directory"}},
		{name: "unsupported spec revision", res: func() reports.Results { r := certRun(reports.Passed); r.SpecRevision = "baton.encoder.v9"; return r }(),
			want: []string{`unsupported spec revision "baton.encoder.v9"`}},
		{name: "unsupported bundle format", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) {
				replaceIn(t, filepath.Join(dir, reports.ProductFile), reports.BundleFormat, "baton.bundle/v0")
				if err := reports.WriteSums(dir); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{`unsupported bundle format "baton.bundle/v0"`}},
		{name: "required rule missing from the results", res: certRun(reports.Passed),
			opts: &reports.VerifyOptions{RulesByLevel: map[string][]string{"core": {"SU-2", "SU-3", "L-2", "SU-9"}}},
			want: []string{"rule SU-9 (core) is missing from results.yaml"}},
		{name: "PRODUCT.yaml claims another level", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) {
				replaceIn(t, filepath.Join(dir, reports.ProductFile), "level: core", "level: faults")
				if err := reports.WriteSums(dir); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{`PRODUCT.yaml claims level "faults" but the certificate in results.yaml is for "core"`}},
		{name: "malformed results.yaml", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, reports.ResultsYAMLFile), "verdict: PASSED\n")
				if err := reports.WriteSums(dir); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"results.yaml: reports: parse results"}},
		{name: "malformed PRODUCT.yaml", res: certRun(reports.Passed),
			change: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, reports.ProductFile), "certifyed: true\n")
				if err := reports.WriteSums(dir); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"PRODUCT.yaml: yaml: unmarshal errors"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeBundle(t, tt.res)
			if tt.change != nil {
				tt.change(t, dir)
			}
			opts := verifyOpts
			if tt.opts != nil {
				opts = *tt.opts
			}
			_, err := reports.VerifyBundle(dir, opts)
			if !errors.Is(err, reports.ErrBundleRejected) {
				t.Fatalf("VerifyBundle = %v; want ErrBundleRejected", err)
			}
			var be *reports.BundleError
			if !errors.As(err, &be) || len(be.Problems) == 0 {
				t.Fatalf("error %v is not a *BundleError with problems", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestVerifyBundleNotADirectory(t *testing.T) {
	dir := t.TempDir()
	if _, err := reports.VerifyBundle(filepath.Join(dir, "nope"), verifyOpts); err == nil || errors.Is(err, reports.ErrBundleRejected) {
		t.Errorf("VerifyBundle(missing dir) = %v; want a plain error", err)
	}
	f := filepath.Join(dir, "file")
	write(t, f, "x")
	if _, err := reports.VerifyBundle(f, verifyOpts); err == nil {
		t.Error("VerifyBundle(a file) = nil")
	}
}

func TestParseSums(t *testing.T) {
	h := strings.Repeat("ab", 32)
	good := h + "  results.yaml\n" + h + " *report.html\n\n"
	m, err := reports.ParseSums([]byte(good))
	if err != nil || len(m) != 2 || m["report.html"] != h {
		t.Errorf("ParseSums(good) = %v, %v", m, err)
	}
	for _, bad := range []string{
		"xyz  results.yaml\n",
		h + "results.yaml\n",
		strings.ToUpper(h) + "  results.yaml\n",
		h + "  a/b\n",
		h + "  ..\n",
		h + "  x\n" + h + "  x\n",
	} {
		if _, err := reports.ParseSums([]byte(bad)); err == nil {
			t.Errorf("ParseSums(%q) = nil error", bad)
		}
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func rm(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), old) {
		t.Fatalf("%s lacks %q", path, old)
	}
	write(t, path, strings.Replace(string(raw), old, new, 1))
}
