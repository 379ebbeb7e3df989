package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/reports"
)

// profileFile writes a target profile; nothing listens at its endpoints.
func profileFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "target.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const opaqueProfile = `name: opaque
endpoints: {producer: 127.0.0.1:1, consumer: 127.0.0.1:1, baseline: 127.0.0.1:1}
level: core
topologies: [E+PD]
backends: [shared_dir]
destructive: true
producer_quota_bytes: 1048576
`

// launchProfileFile is a profile with a launch section (adopting) and the
// fault proxy's address form.
func launchProfileFile(t *testing.T) string {
	return profileFile(t, `name: launched
endpoints: {producer: 127.0.0.1:1, consumer: 127.0.0.1:2}
topologies: [E+PD]
destructive: true
fault_proxy: {listen: 127.0.0.1:7199}
launch:
  adopt: true
  roles:
    producer: {start: [engine, --role, producer, --listen, "${ADDR}", --advertise-control, "${FAULT_PROXY}"]}
    consumer: {start: "engine --role consumer --listen ${ADDR}"}
`)
}

func TestRunCheckCommandWithoutRunning(t *testing.T) {
	opaque := profileFile(t, opaqueProfile)
	tests := []struct {
		name     string
		flags    checkFlags
		wantCode int
		outHas   []string
		errHas   []string
	}{
		{name: "list filtered", flags: checkFlags{list: true, labelFilter: "SU-2 || level:faults"},
			outHas: []string{"SU-2 replay of a consumed reference", "Q-1", "S-3 a quarantined cuda_ipc consumer"}},
		{name: "list with a bad filter", flags: checkFlags{list: true, labelFilter: "SU-2 &&"}, wantCode: ExitUsage, errHas: []string{"label filter"}},
		{name: "dry run", flags: checkFlags{configPath: opaque, dryRun: true}, wantCode: 2, errHas: []string{"the run would end incomplete", "rules H-3, S-1"},
			outHas: []string{"nothing is contacted", "N/V   H-3", "N/A   L-2", "RUN   SU-2",
				"launch: none (the profile has no launch section): the cases labelled needs:restart are not verifiable",
				"N/V   S-1   S-1 Shutdown naming the instance is ACCEPTED, then ALREADY_SHUTTING_DOWN, and new requests get UNAVAILABLE: needs a restart"}},
		{name: "dry run with a launch section and the fault proxy", flags: checkFlags{configPath: launchProfileFile(t), dryRun: true, reportDir: "out/r"}, wantCode: 2, errHas: []string{"the run would end incomplete"},
			outHas: []string{"launch: would start (or adopt, when already READY) producer, consumer, restart them after the cases that take them down (needs:restart), and stop them at the end; logs under out/r/launch",
				"fault proxy: would listen on 127.0.0.1:7199 and forward to the producer's control address 127.0.0.1:1",
				"RUN   S-1   S-1 Shutdown naming the instance is ACCEPTED"}},
		{name: "fault proxy no harness runs", flags: checkFlags{configPath: profileFile(t, opaqueProfile+"fault_proxy: true\n"), dryRun: true}, wantCode: ExitUsage,
			errHas: []string{"fault_proxy: true needs a harness that runs the proxy", "fault_proxy: {listen: host:port}", "--advertise-control"}},
		{name: "a launch that fails is a setup error", flags: checkFlags{configPath: profileFile(t, opaqueProfile+"launch: {start_timeout: 2s, roles: {producer: {start: \"echo no such engine >&2; exit 3\"}}}\n"), reportDir: t.TempDir()},
			wantCode: ExitUsage, errHas: []string{"producer exited before it was ready", "no such engine"}},
		{name: "dry run of a certification", flags: checkFlags{configPath: opaque, dryRun: true, certify: true}, wantCode: ExitUsage,
			errHas: []string{"--certify would refuse", "H-3 (core)"}},
		{name: "certify refused before dialing", flags: checkFlags{configPath: opaque, certify: true}, wantCode: ExitUsage,
			errHas: []string{"--certify refused", "S-1 (core)", "H-3 (core)"}},
		{name: "certify with a filter", flags: checkFlags{configPath: opaque, certify: true, labelFilter: "SU-2"}, wantCode: ExitUsage,
			errHas: []string{"drop the label filter"}},
		{name: "filter selecting nothing of the claim", flags: checkFlags{configPath: opaque, labelFilter: "Q-1"}, wantCode: ExitUsage,
			errHas: []string{"selects no case of the claimed levels (core)"}},
		{name: "bundle without certify", flags: checkFlags{configPath: opaque, bundleDir: t.TempDir()}, wantCode: ExitUsage, errHas: []string{"--bundle needs --certify"}},
		{name: "missing profile", flags: checkFlags{configPath: filepath.Join(t.TempDir(), "nope.yaml")}, wantCode: ExitUsage, errHas: []string{"nope.yaml"}},
		{name: "malformed profile", flags: checkFlags{configPath: profileFile(t, "name: x\nendpoints: [\n")}, wantCode: ExitUsage, errHas: []string{"parse profile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BATON_CONFIG", "")
			var out bytes.Buffer
			err := runCheckCommand(context.Background(), &out, tt.flags, "baton check")
			code := 0
			var ex exitError
			if err != nil {
				if !asExit(err, &ex) {
					t.Fatalf("error %v is not an exitError", err)
				}
				code = ex.code
			}
			if code != tt.wantCode {
				t.Fatalf("exit %d (%v); want %d\n%s", code, err, tt.wantCode, out.String())
			}
			for _, w := range tt.outHas {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.errHas {
				if !strings.Contains(ex.msg, w) {
					t.Errorf("error lacks %q: %s", w, ex.msg)
				}
			}
		})
	}
}

func TestRedactedConfig(t *testing.T) {
	cfg := target.Config{
		Profile: target.Profile{Name: "x", ProducerQuotaBytes: 32 << 20, CaseTimeout: 90 * time.Second,
			TLS: &target.TLS{CAFile: "/etc/ca.pem", CertFile: "c.pem", KeyFile: "/secret/c.key"}},
		Endpoints: map[target.Role]string{target.RoleProducer: "10.0.0.5:50051"},
	}
	m, err := redactedConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m["producer_quota_bytes"] != int64(32<<20) || m["case_timeout"] != "1m30s" {
		t.Errorf("quota %#v, timeout %#v; want int64 33554432 and 1m30s", m["producer_quota_bytes"], m["case_timeout"])
	}
	tls, _ := m["tls"].(map[string]any)
	if tls["key_file"] != reports.Redacted || tls["ca_file"] != "/etc/ca.pem" {
		t.Errorf("tls = %#v; want key_file redacted, ca_file kept", tls)
	}
}

func TestRunReportVerify(t *testing.T) {
	res := reports.Summarize([]reports.CaseResult{
		{Rule: "SU-2", Name: "SU-2 x", Level: "core", Labels: []string{"SU-2", "level:core", "topology:E+PD"}, Outcome: reports.Passed},
	}, map[string][]string{"core": {"SU-2"}})
	res.Tool, res.BatonVersion, res.SpecRevision = "baton check", "0.1.0", "baton.encoder.v1"
	c := reports.IssueCertificate(res, []string{"core"}, []string{"E+PD"}, []string{"shared_dir"})
	res.Certificate = &c
	dir := t.TempDir()
	if err := reports.WriteBundle(dir, res); err != nil {
		t.Fatal(err)
	}
	// This baton's level table requires every Core rule: a one-rule bundle
	// is rejected, naming the missing rules.
	var out bytes.Buffer
	err := runReportVerify(&out, dir)
	var ex exitError
	if !asExit(err, &ex) || ex.code != ExitRejected || !strings.Contains(ex.msg, "rule SU-1 (core) is missing from results.yaml") {
		t.Errorf("verify = %v; want exit %d naming SU-1", err, ExitRejected)
	}
	err = runReportVerify(&out, filepath.Join(dir, "nope"))
	if !asExit(err, &ex) || ex.code != ExitUsage {
		t.Errorf("verify of a missing directory = %v; want exit %d", err, ExitUsage)
	}
	if errors.Is(err, reports.ErrBundleRejected) {
		t.Error("a missing directory reads as a rejected bundle")
	}
}
