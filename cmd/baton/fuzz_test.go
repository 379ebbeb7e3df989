package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/baton-dev/baton/conformance/mutants"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/target/inprocess"
	"github.com/baton-dev/baton/engine/server"
)

// fuzzProfile starts the in-process reference engine (with hooks, for a
// mutant) and writes a profile naming its endpoints.
func fuzzProfile(t *testing.T, hooks server.Hooks) string {
	t.Helper()
	addrs := map[target.Role]string{}
	_, stop, err := inprocess.StartEPD(inprocess.Options{Preset: "tiny", CacheDir: t.TempDir(), Hooks: hooks,
		OnListen: func(r target.Role, a string) { addrs[r] = a }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop() })
	return profileFile(t, fmt.Sprintf(`name: in-process
endpoints: {producer: %s, consumer: %s}
topologies: [E+PD]
backends: [shared_dir]
observables: true
reference_format: baton-json-v1
`, addrs[target.RoleProducer], addrs[target.RoleConsumer]))
}

// TestFuzzPassesOnReferenceEngine: `baton fuzz` over gRPC against the
// reference engine prints SEED= first and PASSED last.
func TestFuzzPassesOnReferenceEngine(t *testing.T) {
	cfg := fuzzProfile(t, server.Hooks{})
	var out bytes.Buffer
	err := runFuzzCommand(&out, fuzzFlags{configPath: cfg, checks: 10, steps: 10, noFailFile: true})
	if err != nil {
		t.Fatalf("baton fuzz = %v; want PASSED\n%s", err, out.String())
	}
	if !strings.HasPrefix(out.String(), "SEED=") || !strings.Contains(out.String(), "PASSED (10 checks") {
		t.Errorf("output:\n%s\nwant SEED= first and PASSED (10 checks, ...) last", out.String())
	}
}

// TestFuzzKillsMutant: against an engine that answers ABORTED to every
// release (SU-3), `baton fuzz` exits 1 and prints the reproduce command.
func TestFuzzKillsMutant(t *testing.T) {
	m, err := mutants.ByName("su3-release-always-aborted")
	if err != nil {
		t.Fatal(err)
	}
	var hooks server.Hooks
	m.Apply(&hooks)
	cfg := fuzzProfile(t, hooks)
	var out bytes.Buffer
	err = runFuzzCommand(&out, fuzzFlags{configPath: cfg, checks: 50, steps: 15, noFailFile: true, shrinkTime: 2e9})
	var ex exitError
	if !errors.As(err, &ex) || ex.code != ExitFailed {
		t.Fatalf("baton fuzz against %s = %v; want exit %d\n%s", m.Name, err, ExitFailed, out.String())
	}
	if !strings.Contains(ex.msg, "reproduce with: baton fuzz --config ") || !strings.Contains(out.String(), "SU-3") {
		t.Errorf("exit message %q, output:\n%s\nwant the reproduce command and the SU-3 failure", ex.msg, out.String())
	}
	t.Log(ex.msg)
}

// TestFuzzSim: `baton fuzz --sim` passes on the correct driver and, with
// the read-without-claim driver mutant, exits 1 with the reproduce command.
func TestFuzzSim(t *testing.T) {
	var out bytes.Buffer
	if err := runFuzzCommand(&out, fuzzFlags{sim: true, checks: 200, steps: 15, noFailFile: true}); err != nil {
		t.Fatalf("baton fuzz --sim = %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "PASSED (200 checks") {
		t.Errorf("output:\n%s\nwant PASSED (200 checks, ...)", out.String())
	}
	out.Reset()
	err := runFuzzCommand(&out, fuzzFlags{sim: true, mutant: "read-without-claim", checks: 200, steps: 15, noFailFile: true, shrinkTime: 2e9})
	var ex exitError
	if !errors.As(err, &ex) || ex.code != ExitFailed || !strings.Contains(ex.msg, "baton fuzz --sim --mutant read-without-claim") {
		t.Fatalf("baton fuzz --sim --mutant read-without-claim = %v; want exit 1 with the reproduce command\n%s", err, out.String())
	}
}
