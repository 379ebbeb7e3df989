package check

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/server"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// serve starts one reference engine in-process with cfg (tiny preset
// unless cfg says otherwise) and returns its gRPC engine; the test stops
// it.
func serve(t *testing.T, cfg server.Config) *target.GRPCEngine {
	t.Helper()
	if cfg.Preset == "" {
		cfg.Preset = "tiny"
	}
	cfg.ShutdownLinger = time.Millisecond
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewServer(cfg, lis, nil)
	if err != nil {
		lis.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	e, err := target.DialEngine(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		e.Close()
	})
	return e
}

// epd is a profile and the configs of an E+PD target with a baseline,
// all on one shared directory, which each test breaks in one way.
type epd struct {
	profile              target.Profile
	prod, cons, baseline server.Config
}

func newEPD(t *testing.T) *epd {
	dir := t.TempDir()
	return &epd{
		profile:  target.Profile{Name: "preflight", Topologies: []string{target.TopologyEPD}, Backends: []string{"shared_dir"}},
		prod:     server.Config{Role: server.RoleEncoder, CacheDir: dir, Backend: server.BackendSharedDir},
		cons:     server.Config{Role: server.RolePD, CacheDir: dir},
		baseline: server.Config{Role: server.RoleAggregated},
	}
}

// target starts the engines; wrap, when set, replaces an engine.
func (c *epd) target(t *testing.T, wrap func(target.Role, target.Engine) target.Engine) *target.Static {
	t.Helper()
	return target.NewStatic(c.profile, c.engines(t, wrap))
}

// engines starts the engines of c.
func (c *epd) engines(t *testing.T, wrap func(target.Role, target.Engine) target.Engine) map[target.Role]target.Engine {
	t.Helper()
	engines := map[target.Role]target.Engine{
		target.RoleProducer: serve(t, c.prod),
		target.RoleConsumer: serve(t, c.cons),
		target.RoleBaseline: serve(t, c.baseline),
	}
	if wrap != nil {
		for r, e := range engines {
			engines[r] = wrap(r, e)
		}
	}
	return engines
}

// probeMismatch probes tg and returns the error, which must wrap
// ErrProfileMismatch and name every want.
func probeMismatch(t *testing.T, tg target.Target, want ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Probe(ctx, tg)
	if !errors.Is(err, ErrProfileMismatch) {
		t.Fatalf("Probe = %v; want ErrProfileMismatch", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Probe error %q does not mention %q", err, w)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
		t.Errorf("Probe error has %d lines; want one clear line:\n%s", n, err)
	}
	return err
}

// TestPreflightPasses: a correctly described E+PD target, with observables
// and test hooks declared and on, passes the preflight, in well under a
// second on the tiny preset.
func TestPreflightPasses(t *testing.T) {
	c := newEPD(t)
	c.profile.Observables, c.profile.TestHooks = true, true
	c.prod.TestHooks, c.cons.TestHooks, c.baseline.TestHooks = true, true, true
	engines := c.engines(t, nil)
	start := time.Now()
	if err := Probe(context.Background(), target.NewStatic(c.profile, engines)); err != nil {
		t.Fatalf("Probe = %v; want nil", err)
	}
	t.Logf("preflight took %v", time.Since(start).Round(time.Millisecond))
	load, err := engines[target.RoleProducer].GetLoad(context.Background())
	if err != nil || load.GetAttributes().GetFields()["encoder.exports.entries"].GetNumberValue() != 0 {
		t.Errorf("after the preflight the producer holds %v entries (%v); want 0: the preflight releases what it published", load.GetAttributes().GetFields()["encoder.exports.entries"], err)
	}
}

// One test per known profile mistake: each is a configuration error
// (ErrProfileMismatch) in one line naming the profile field and both values.

func TestPreflightPDWithoutCacheDir(t *testing.T) {
	c := newEPD(t)
	c.cons.CacheDir = "" // a PD without --cache-dir accepts tcp only
	probeMismatch(t, c.target(t, nil), "backends [shared_dir]", "consumer 127.0.0.1:", "does not accept shared_dir", "ModelInfo.encoder.backends [tcp]")
}

func TestPreflightDifferentCacheDirs(t *testing.T) {
	c := newEPD(t)
	c.cons.CacheDir = t.TempDir()
	probeMismatch(t, c.target(t, nil), "backends [shared_dir]", "consumer 127.0.0.1:", "cannot claim the producer 127.0.0.1:", "share one cache directory")
}

func TestPreflightBaselineIsTheConsumer(t *testing.T) {
	c := newEPD(t)
	engines := c.engines(t, nil)
	engines[target.RoleBaseline] = engines[target.RoleConsumer]
	probeMismatch(t, target.NewStatic(c.profile, engines), "endpoints.baseline", "ENCODER_ROLE_CONSUMER", "ENCODER_ROLE_NONE", "is endpoints.baseline pointed at the wrong process")
}

func TestPreflightBaselineOnAnotherPreset(t *testing.T) {
	c := newEPD(t)
	c.baseline.Preset = "base"
	probeMismatch(t, c.target(t, nil), `preset: `, `baton.preset`, `producer 127.0.0.1:`, `"tiny"`, `baseline 127.0.0.1:`, `"base"`)
}

func TestPreflightProducerAndConsumerOnDifferentPresets(t *testing.T) {
	c := newEPD(t)
	c.cons.Preset = "base"
	probeMismatch(t, c.target(t, nil), `preset: `, `producer 127.0.0.1:`, `"tiny"`, `consumer 127.0.0.1:`, `"base"`)
}

func TestPreflightUndeclaredBackend(t *testing.T) {
	c := newEPD(t)
	c.profile.Backends = []string{"shared_dir", "cuda_ipc"} // a CPU engine
	probeMismatch(t, c.target(t, nil), "backends [shared_dir cuda_ipc]", "does not accept cuda_ipc", "[shared_dir tcp]")
}

func TestPreflightProducerOnAnotherBackend(t *testing.T) {
	c := newEPD(t)
	c.prod.Backend, c.prod.CacheDir = server.BackendTCP, ""
	probeMismatch(t, c.target(t, nil), "backends [shared_dir]", "producer 127.0.0.1:", "publishes on [tcp]")
}

func TestPreflightTestHooksOff(t *testing.T) {
	c := newEPD(t)
	c.profile.TestHooks = true
	c.baseline.TestHooks = true // only the producer was started without --test-hooks
	probeMismatch(t, c.target(t, nil), "test_hooks: true", "producer 127.0.0.1:", "did not honour baton.omit_content_hash", "content hash")
	c = newEPD(t)
	c.profile.TestHooks = true
	c.prod.TestHooks = true // only the baseline was started without --test-hooks
	probeMismatch(t, c.target(t, nil), "test_hooks: true", "baseline 127.0.0.1:", "did not honour baton.encoder_fail", "finished with tokens")
}

func TestPreflightObservablesMissing(t *testing.T) {
	c := newEPD(t)
	c.profile.Observables = true
	tg := c.target(t, func(r target.Role, e target.Engine) target.Engine {
		if r == target.RoleConsumer {
			return noCounters{e}
		}
		return e
	})
	probeMismatch(t, tg, "observables: true, but GetLoad on consumer 127.0.0.1:", "has no encoder.exports.entries", "CONTRACT section 4")
}

// noCounters is an engine whose GetLoad carries no attributes (one without
// the CONTRACT section 4 observables).
type noCounters struct{ target.Engine }

func (n noCounters) GetLoad(ctx context.Context) (*pb.LoadInfo, error) {
	li, err := n.Engine.GetLoad(ctx)
	if err == nil {
		li.Attributes = &structpb.Struct{}
	}
	return li, err
}

func (n noCounters) Address() string { return n.Engine.(interface{ Address() string }).Address() }

// TestPreflightTopologyWithoutEndpoints: topologies [E+P+D] with only E+PD
// endpoints is found without contacting anything (ProfileProblems, which
// --dry-run reports too) and by the probe.
func TestPreflightTopologyWithoutEndpoints(t *testing.T) {
	roles := []target.Role{target.RoleBaseline, target.RoleConsumer, target.RoleProducer}
	p := target.Profile{Topologies: []string{target.TopologyEPPD}}
	got := ProfileProblems(p, roles)
	if len(got) != 1 || !strings.Contains(got[0], "topologies [E+P+D]: E+P+D needs an endpoint for prefill, decode") {
		t.Errorf("ProfileProblems = %q; want one line naming the missing prefill and decode endpoints", got)
	}
	c := newEPD(t)
	c.profile.Topologies = []string{target.TopologyEPPD}
	probeMismatch(t, c.target(t, nil), "topologies [E+P+D]", "prefill, decode")
}

// TestPreflightUnknownBackend: a misspelt backend name is a profile error
// when the profile file is read.
func TestPreflightUnknownBackend(t *testing.T) {
	_, err := target.ParseConfig([]byte("endpoints: {producer: 127.0.0.1:1}\nbackends: [shared-dir]\n"))
	if !errors.Is(err, target.ErrBadProfile) || !strings.Contains(err.Error(), `unknown backend "shared-dir"`) {
		t.Errorf("ParseConfig = %v; want ErrBadProfile naming the unknown backend", err)
	}
}

// identityInfo is a probe answer of one endpoint with the given engine
// name, preset and model id.
func identityInfo(role target.Role, engine, preset, model string) endpointInfo {
	extra, _ := structpb.NewStruct(map[string]any{"baton.preset": preset})
	return endpointInfo{role: role, server: &pb.ServerInfo{EngineName: engine, Extra: extra}, model: &pb.ModelInfo{ModelId: model, ServedModelName: model}}
}

// TestPreflightMixedImplementations: two implementations may meet in one
// topology (the cross-implementation matrix), each on its own model; one
// implementation on two presets is still a set-up mistake, and the
// baseline must be the consumer implementation's.
func TestPreflightMixedImplementations(t *testing.T) {
	goE := identityInfo(target.RoleProducer, "baton-reference", "tiny", "baton-toy-tiny")
	pyPD := identityInfo(target.RoleConsumer, "baton-py", "py-tiny", "baton-py/toy-vlm-1")
	pyBase := identityInfo(target.RoleBaseline, "baton-py", "py-tiny", "baton-py/toy-vlm-1")
	goBase := identityInfo(target.RoleBaseline, "baton-reference", "tiny", "baton-toy-tiny")
	if got := identityProblems([]endpointInfo{goE, pyPD, pyBase}); len(got) != 0 {
		t.Errorf("Go E + Python PD + Python baseline: problems %q; want none", got)
	}
	got := identityProblems([]endpointInfo{goE, pyPD, goBase})
	if len(got) != 1 || !strings.Contains(got[0], "endpoints.baseline") || !strings.Contains(got[0], "consumer implementation's aggregated engine") {
		t.Errorf("Go E + Python PD + Go baseline: problems %q; want one naming endpoints.baseline", got)
	}
	pyBaseOther := identityInfo(target.RoleBaseline, "baton-py", "py-small", "baton-py/toy-vlm-1")
	got = identityProblems([]endpointInfo{goE, pyPD, pyBaseOther})
	if len(got) != 1 || !strings.Contains(got[0], "different presets") || !strings.Contains(got[0], `"py-small"`) {
		t.Errorf("one implementation on two presets: problems %q; want the preset line", got)
	}
}

// TestPreflightTransferTrust: over tcp, a consumer whose trusted producers
// leave out the producer's advertised control address (or a producer whose
// trusted consumers leave out the consumer's transfer agent) refuses the
// first valid handoff FAILED_PRECONDITION (CONTRACT SE-3): a set-up
// mistake, one line naming SE-3 and the endpoint, never rule failures;
// with both lists right the preflight passes.
func TestPreflightTransferTrust(t *testing.T) {
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	agent := free()
	for _, tc := range []struct {
		name                 string
		trustProd, trustCons bool
	}{{"consumer trusts no producer", false, true}, {"producer trusts no consumer agent", true, false}, {"both lists right", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			prodCfg := server.Config{Role: server.RoleEncoder, Backend: server.BackendTCP}
			if tc.trustCons {
				prodCfg.TrustedConsumers = []string{agent}
			}
			prod := serve(t, prodCfg)
			consCfg := server.Config{Role: server.RolePD, TransferListen: agent}
			if tc.trustProd {
				consCfg.TrustedProducers = []string{prod.Address()}
			}
			engines := map[target.Role]target.Engine{target.RoleProducer: prod, target.RoleConsumer: serve(t, consCfg), target.RoleBaseline: serve(t, server.Config{Role: server.RoleAggregated})}
			tg := target.NewStatic(target.Profile{Name: "preflight tcp", Topologies: []string{target.TopologyEPD}, Backends: []string{"tcp"}}, engines)
			if tc.trustProd && tc.trustCons {
				if err := Probe(context.Background(), tg); err != nil {
					t.Fatalf("Probe = %v; want nil", err)
				}
				return
			}
			probeMismatch(t, tg, "backends [tcp]", "FAILED_PRECONDITION", "CONTRACT SE-3", prod.Address())
		})
	}
}
