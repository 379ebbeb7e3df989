package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/launch"
	"github.com/baton-dev/baton/conformance/target"
)

// TestProfileMistakesExitSetup: profile mistakes that a run used to report
// as engine failures are configuration errors: `baton check` exits 3
// before any case, with one line naming the profile field and both values.
// The per-mistake probes (PD without --cache-dir, different cache
// directories or presets, ...) are in conformance/check's preflight tests;
// these run the binary against real `baton serve` processes.
func TestProfileMistakesExitSetup(t *testing.T) {
	work := t.TempDir()
	topo, err := launch.StartEPD(context.Background(), launch.Options{Binary: batonBinary, Preset: "tiny", WorkDir: work})
	if err != nil {
		t.Fatalf("start topology: %v", err)
	}
	defer topo.Shutdown(context.Background(), 30*time.Second)
	for _, tc := range []struct {
		name   string
		edit   func(*target.Config)
		args   []string
		wantIn []string
	}{
		{name: "baseline pointed at the consumer",
			edit:   func(c *target.Config) { c.Endpoints[target.RoleBaseline] = c.Endpoints[target.RoleConsumer] },
			wantIn: []string{"endpoints.baseline", "ENCODER_ROLE_CONSUMER", "ENCODER_ROLE_NONE"}},
		{name: "a backend the CPU consumer does not accept",
			edit:   func(c *target.Config) { c.Backends = []string{"shared_dir", "cuda_ipc"} },
			wantIn: []string{"backends [shared_dir cuda_ipc]", "does not accept cuda_ipc"}},
		{name: "test hooks declared, engines started without them",
			edit:   func(c *target.Config) { c.TestHooks = true },
			wantIn: []string{"test_hooks: true", "did not honour baton."}},
		{name: "a misspelt backend",
			edit:   func(c *target.Config) { c.Backends = []string{"shared-dir"} },
			wantIn: []string{`unknown backend "shared-dir"`}},
		{name: "E+P+D declared without its endpoints",
			edit:   func(c *target.Config) { c.Topologies = []string{target.TopologyEPPD} },
			wantIn: []string{"topologies [E+P+D]", "prefill, decode"}},
		{name: "E+P+D declared without its endpoints, dry run",
			edit:   func(c *target.Config) { c.Topologies = []string{target.TopologyEPPD} },
			args:   []string{"--dry-run"},
			wantIn: []string{"topologies [E+P+D]", "prefill, decode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := topo.Config()
			cfg.Endpoints = map[target.Role]string{}
			for r, a := range topo.Config().Endpoints {
				cfg.Endpoints[r] = a
			}
			tc.edit(&cfg)
			dir := t.TempDir()
			profile := writeProfile(t, dir, cfg)
			args := append([]string{"check", "--config", profile, "--report-dir", filepath.Join(dir, "report")}, tc.args...)
			out, code := runBaton(t, args...)
			if code != 3 {
				t.Fatalf("baton check exited %d; want 3 (configuration error):\n%s", code, lastLines(out, 20))
			}
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "baton:") {
					line = l
				}
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(line, w) {
					t.Errorf("error line %q does not mention %q", line, w)
				}
			}
			if strings.Contains(out, "PASS ") || strings.Contains(out, "FAIL ") {
				t.Errorf("cases ran before the configuration error:\n%s", lastLines(out, 20))
			}
		})
	}
}
