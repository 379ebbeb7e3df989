package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-dev/baton/internal/progress"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

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
	err := runFuzzCommand(&out, fuzzFlags{configPath: cfg, checks: 10, steps: 10, noFailFile: true, stateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("baton fuzz = %v; want PASSED\n%s", err, out.String())
	}
	if !strings.HasPrefix(out.String(), "SEED=") || !strings.Contains(out.String(), "PASSED (10 checks") {
		t.Errorf("output:\n%s\nwant SEED= first and PASSED (10 checks, ...) last", out.String())
	}
}

// TestFuzzKillsMutant: against an engine that answers ABORTED to every
// release (SU-3), `baton fuzz` exits 1, keeps the fail file under
// --state-dir in a directory keyed by the target's name (none under the
// working directory), and names a baton command to reproduce it, never go
// test's flags; progress lines go to the progress writer.
func TestFuzzKillsMutant(t *testing.T) {
	m, err := mutants.ByName("su3-release-always-aborted")
	if err != nil {
		t.Fatal(err)
	}
	var hooks server.Hooks
	m.Apply(&hooks)
	cfg := fuzzProfile(t, hooks)
	state := t.TempDir()
	wd, _ := os.Getwd()
	var out, prog bytes.Buffer
	err = runFuzzCommand(&out, fuzzFlags{configPath: cfg, checks: 50, steps: 15, shrinkTime: 2e9, stateDir: state,
		progress: progress.New(&prog, progress.Options{Mode: progress.Lines, Unit: "checks", Refresh: -1})})
	var ex exitError
	if !errors.As(err, &ex) || ex.code != ExitFailed {
		t.Fatalf("baton fuzz against %s = %v; want exit %d\n%s", m.Name, err, ExitFailed, out.String())
	}
	if !strings.Contains(out.String(), "SU-3") {
		t.Errorf("output lacks the SU-3 failure:\n%s", out.String())
	}
	files, _ := filepath.Glob(filepath.Join(state, "testdata", "rapid", fuzzPropertyName+"-in-process", "*.fail"))
	if len(files) != 1 {
		t.Fatalf("fail files under the state directory = %v; want one, in the target's directory", files)
	}
	want := "reproduce with: baton fuzz --config " + cfg + " --state-dir " + state + " --replay " + files[0]
	if !strings.Contains(ex.msg, want) {
		t.Errorf("exit message %q; want %q", ex.msg, want)
	}
	if strings.Contains(out.String(), "-run=") || strings.Contains(out.String(), "-rapid.") || !strings.Contains(out.String(), "To reproduce: baton fuzz") {
		t.Errorf("output names go test flags, or no baton command, to reproduce:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(wd, "testdata", "rapid", fuzzPropertyName+"-in-process")); err == nil {
		t.Errorf("a fail file directory appeared under the working directory %s", wd)
	}
	if now, _ := os.Getwd(); now != wd {
		t.Errorf("working directory after the run = %s; want %s back", now, wd)
	}
	if !strings.Contains(prog.String(), "progress: 50 checks to run") {
		t.Errorf("progress lines:\n%s", prog.String())
	}
	t.Log(ex.msg)
}

// TestFuzzRefusesWhatIsNotABatonEngine: a port nothing listens on and a
// gRPC server without the openengine Control service are exit 3 with the
// probe's reason, before any property runs.
func TestFuzzRefusesWhatIsNotABatonEngine(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain := grpc.NewServer()
	healthpb.RegisterHealthServer(plain, health.NewServer())
	go plain.Serve(lis)
	defer plain.Stop()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	for _, tt := range []struct{ name, addr, want string }{
		{"dead port", deadAddr, "unreachable"},
		{"plain gRPC server", lis.Addr().String(), "does not speak baton.encoder.v1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := profileFile(t, "name: x\nendpoints: {producer: "+tt.addr+", consumer: "+tt.addr+"}\n")
			var out bytes.Buffer
			err := runFuzzCommand(&out, fuzzFlags{configPath: cfg, checks: 5, steps: 5, stateDir: t.TempDir()})
			var ex exitError
			if !errors.As(err, &ex) || ex.code != ExitUsage || !strings.Contains(ex.msg, tt.want) || !strings.Contains(ex.msg, "no property was checked") {
				t.Fatalf("baton fuzz against a %s = %v; want exit %d naming %q", tt.name, err, ExitUsage, tt.want)
			}
			if strings.Contains(out.String(), "SEED=") {
				t.Errorf("the property started against a %s:\n%s", tt.name, out.String())
			}
		})
	}
}

// TestFuzzSim: `baton fuzz --sim` passes on the correct driver and, with
// the read-without-claim driver mutant, exits 1 with the reproduce command.
func TestFuzzSim(t *testing.T) {
	var out bytes.Buffer
	if err := runFuzzCommand(&out, fuzzFlags{sim: true, checks: 200, steps: 15, noFailFile: true, stateDir: t.TempDir()}); err != nil {
		t.Fatalf("baton fuzz --sim = %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "PASSED (200 checks") {
		t.Errorf("output:\n%s\nwant PASSED (200 checks, ...)", out.String())
	}
	out.Reset()
	err := runFuzzCommand(&out, fuzzFlags{sim: true, mutant: "read-without-claim", checks: 200, steps: 15, noFailFile: true, shrinkTime: 2e9, stateDir: t.TempDir()})
	var ex exitError
	if !errors.As(err, &ex) || ex.code != ExitFailed || !strings.Contains(ex.msg, "baton fuzz --sim --mutant read-without-claim") {
		t.Fatalf("baton fuzz --sim --mutant read-without-claim = %v; want exit 1 with the reproduce command\n%s", err, out.String())
	}
}
