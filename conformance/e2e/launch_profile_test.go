package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
)

// TestLaunchProfileCertifiesTwice: a vendor's profile whose launch section
// starts the reference engine as separate processes (`baton serve`
// commands, not conformance/launch), E+PD over tcp with the harness's
// fault proxy in front of the producer (fault_proxy {listen}, advertised
// by the producer), claiming Faults, is checked by two `baton check` runs
// in a row without anything restarted by hand: each run starts the roles,
// restarts what S-1, S-2, S-4, X-1 and the Faults cases take down, passes
// every rule of every level (exit 0; the trust lists name the proxy and
// the consumer's transfer agent, CONTRACT SE-3), and stops every role at
// the end (nothing answers afterwards).
func TestLaunchProfileCertifiesTwice(t *testing.T) {
	needLong(t)
	work := t.TempDir()
	profile := filepath.Join(work, "target.yaml")
	writeLaunchProfile(t, profile)
	for run := 1; run <= 2; run++ {
		start := time.Now()
		reportDir := filepath.Join(work, fmt.Sprintf("report-%d", run))
		out, code := runBatonIn(t, work, "check", "--config", profile, "--report-dir", reportDir, "--progress", "off")
		res, err := reports.ReadJSON(filepath.Join(reportDir, "results.json"))
		if err != nil {
			t.Fatalf("run %d: baton check exited %d without results.json (%v):\n%s", run, code, err, lastLines(out, 60))
		}
		t.Logf("run %d: baton check exited %d in %v (%d cases)", run, code, time.Since(start).Round(100*time.Millisecond), len(res.Cases))
		if code != 0 {
			t.Errorf("run %d: baton check exited %d; want 0:\n%s", run, code, lastLines(out, 60))
		}
		for _, r := range res.Rules {
			if r.Outcome != reports.Passed && r.Outcome != reports.NotApplicable {
				t.Errorf("run %d: %s (%s) %s: %s", run, r.Rule, r.Level, r.Outcome, r.Message)
			}
		}
		for _, l := range []string{"core", "lifecycle", "faults"} {
			if res.Levels[l] != reports.Passed {
				t.Errorf("run %d: level %s = %s; want passed", run, l, res.Levels[l])
			}
		}
		for _, rule := range []string{"S-1", "S-2", "S-4", "X-1", "Q-1", "Q-2", "Q-4", "Q-6", "SE-3", "SE-4", "SE-5"} {
			if !passed(res, rule) {
				t.Errorf("run %d: %s did not pass: the cases that need a restart must run and pass with a launch section", run, rule)
			}
		}
		for _, want := range []string{"launch: producer started", "launch: consumer ready", "launch: consumer stopped: exit status 0", "launch: producer stopped: exit status 0"} {
			if !strings.Contains(out, want) {
				t.Errorf("run %d: output lacks %q:\n%s", run, want, lastLines(out, 20))
			}
		}
		if _, err := os.Stat(filepath.Join(reportDir, "launch", "consumer.2.log")); err != nil {
			t.Errorf("run %d: no log of a restarted consumer under the report directory: %v", run, err)
		}
		if addr := stillAnswering(t, profile); addr != "" {
			t.Fatalf("run %d: %s still answers after baton check ended; the next run could not start", run, addr)
		}
	}
}

func passed(res reports.Results, rule string) bool {
	n := 0
	for _, r := range res.Rules {
		if r.Rule == rule {
			if r.Outcome != reports.Passed {
				return false
			}
			n++
		}
	}
	return n > 0
}

// writeLaunchProfile writes the vendor's profile: free loopback ports, the
// tiny preset, a 16 MiB producer quota (L-5 in a few publishes), a 32 MiB
// decode budget on the producer and the baseline (SE-4's case fills it
// with one image), the consumer trusting the fault proxy as its producer
// and the producer trusting the consumer's transfer agent (SE-3), loopback
// as the harness's untrusted host (the trust lists name exact ports).
func writeLaunchProfile(t *testing.T, path string) {
	t.Helper()
	ports := freePorts(t, 5)
	q := fmt.Sprint(16 << 20)
	budget := []string{"--decode-budget-bytes", fmt.Sprint(32 << 20), "--max-request-pixels", fmt.Sprint(32 << 20 / 8)}
	serve := func(role string, args ...string) string {
		argv := append([]string{batonBinary, "serve", "--role", role, "--listen", "${ADDR}", "--preset", "tiny", "--test-hooks"}, args...)
		return "[" + quoteAll(argv) + "]"
	}
	text := `name: reference engine, launched by its profile
level: faults
endpoints: {producer: ` + ports[0] + `, consumer: ` + ports[1] + `, baseline: ` + ports[2] + `}
topologies: [E+PD]
backends: [tcp]
observables: true
test_hooks: true
destructive: true
producer_quota_bytes: ` + q + `
decode_budget_bytes: ` + fmt.Sprint(32<<20) + `
reference_format: baton-json-v1
case_timeout: 60s
untrusted_host: 127.0.0.1
agent_format: baton-xfer-v1
fault_proxy: {listen: ` + ports[3] + `}
launch:
  roles:
    producer:
      start: ` + serve("encoder", append([]string{"--backend", "tcp", "--advertise-control", "${FAULT_PROXY}", "--transfer-timeout", "3s", "--producer-quota-bytes", q, "--trusted-consumers", ports[4]}, budget...)...) + `
    consumer:
      start: ` + serve("pd", "--cache-dir", "${CACHE_DIR}", "--transfer-timeout", "3s", "--transfer-listen", ports[4], "--trusted-producers", "${FAULT_PROXY}") + `
    baseline:
      start: ` + serve("aggregated", budget...) + `
`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := target.LoadConfigEnv(path, nil); err != nil {
		t.Fatalf("the profile does not load: %v\n%s", err, text)
	}
}

func quoteAll(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, ", ")
}

// freePorts returns n loopback addresses nothing listened on a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// stillAnswering returns an endpoint of the profile that still accepts a
// connection, or "".
func stillAnswering(t *testing.T, profile string) string {
	t.Helper()
	cfg, err := target.LoadConfigEnv(profile, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range cfg.Endpoints {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
	}
	return ""
}

// runBatonIn runs the baton binary in dir and returns its combined output
// and exit code.
func runBatonIn(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, batonBinary, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("baton %v: %v\n%s", args, err, out.String())
	}
	return out.String(), code
}
