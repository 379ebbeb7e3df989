// Package target is the one interface through which baton's conformance
// suites see an implementation of the baton.encoder.v1 handoff: a remote gRPC
// endpoint set, the reference engine started in-process, or the simulator.
// The suites never import an engine or the simulator; they see only Target
// (ARCHITECTURE.md "Conformance for any implementation").
package target

import (
	"context"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Role names one party of a topology (CONTRACT section 1).
type Role string

// Roles a target may serve.
const (
	RoleProducer Role = "producer" // E: encodes and publishes
	RoleConsumer Role = "consumer" // PD: consumes and generates
	RolePrefill  Role = "prefill"  // P: consumes, prefill only
	RoleDecode   Role = "decode"   // D: decodes from P's KV session
	RoleBaseline Role = "baseline" // aggregated engine, the B-1 baseline
)

// Engine is one endpoint speaking openengine.v1 with the baton.encoder.v1
// profile. Unary methods return the gRPC status as error (use status.Code).
type Engine interface {
	// Generate runs one request to its end and collects the stream. The error
	// is only for a harness failure (cannot reach the engine); the gRPC status
	// of the stream is in GenerateResult.Status.
	Generate(ctx context.Context, req *pb.GenerateRequest) (*GenerateResult, error)
	GetServerInfo(ctx context.Context) (*pb.ServerInfo, error)
	GetModelInfo(ctx context.Context, model string) (*pb.ModelInfo, error)
	GetLoad(ctx context.Context) (*pb.LoadInfo, error)
	Health(ctx context.Context) (*pb.HealthResponse, error)
	Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error)
	Shutdown(ctx context.Context, req *pb.ShutdownRequest) (*pb.ShutdownResponse, error)
}

// Profile is what a target declares about itself: what it serves and which
// observables and hooks a case may rely on. A case that needs something the
// profile does not declare reports `not verifiable` (CONTRACT section 4).
//
// Every field has a yaml key (the profile file, LoadConfig) and a BATON_*
// environment variable that overrides it (EnvVars, EnvHelp).
type Profile struct {
	// Name identifies the target in reports.
	Name string `yaml:"name" json:"name"`
	// Implementation names the engine under test (vendor, product, version,
	// contact) for reports and the certification bundle's PRODUCT.yaml.
	Implementation Implementation `yaml:"implementation" json:"implementation"`
	// Model is the model name to put in GenerateRequest.model ("" = engine default).
	Model string `yaml:"model" json:"model"`
	// Level is the conformance level claimed (CONTRACT section 5): "core",
	// "lifecycle" or "faults" (default "core"). The report covers the rules of
	// that level and those below it.
	Level string `yaml:"level" json:"level"`
	// Topologies served: TopologyEPD ("E+PD"), TopologyEPPD ("E+P+D").
	Topologies []string `yaml:"topologies" json:"topologies"`
	// Backends the consumer accepts ("shared_dir", "tcp", ...).
	Backends []string `yaml:"backends" json:"backends"`
	// Observables: GetLoad carries the CONTRACT section 4 counters.
	Observables bool `yaml:"observables" json:"observables"`
	// TestHooks: GenerateRequest.extra baton.* hooks are honoured.
	TestHooks bool `yaml:"test_hooks" json:"test_hooks"`
	// FaultProxy: the harness may put its fault proxy between the consumer
	// and the producer's advertised control address (CONTRACT section 4);
	// the Faults level needs it. The profile key fault_proxy is true, or
	// {listen: host:port, producer_control: host:port} (Config.FaultProxyAt),
	// which also sets it.
	FaultProxy bool `yaml:"-" json:"fault_proxy"`
	// Destructive: the suite may shut instances down (S-1 accepted); such cases run last.
	Destructive bool `yaml:"destructive" json:"destructive"`
	// ProducerQuotaBytes is the producer's published-bytes bound (L-5); 0 = undeclared.
	ProducerQuotaBytes int64 `yaml:"producer_quota_bytes" json:"producer_quota_bytes"`
	// DecodeBudgetBytes is the producer's bound on the decoded image bytes
	// all requests hold at once (CONTRACT SE-4: "decode memory and CPU are
	// bounded across all requests together (beyond the bound,
	// RESOURCE_EXHAUSTED)"), 8 bytes a pixel (16-bit RGBA: what the SE-4
	// case's 16-bit RGBA PNGs hold decoded in any form); 0 = undeclared
	// (the SE-4 decode-budget case is then not verifiable). The case
	// decodes about half of it, so declare a small one (the reference
	// engine: --decode-budget-bytes with --max-request-pixels).
	DecodeBudgetBytes int64 `yaml:"decode_budget_bytes" json:"decode_budget_bytes"`
	// ReferenceFormat declares the opaque-state format so H-3/SU-5 cases can
	// corrupt a field: "baton-json-v1" (JSON with id, items[].hash, tag) or "" (opaque).
	ReferenceFormat string `yaml:"reference_format" json:"reference_format"`
	// MediaFormats are the image formats the engine decodes (CONTRACT "How
	// requests look"): MediaPNG and MediaJPEG are required and always
	// included, MediaGIF and MediaWebP optional. Empty means the required
	// two only (DeclaredMediaFormats); a case never depends on an optional
	// format the profile leaves out.
	MediaFormats []string `yaml:"media_formats" json:"media_formats,omitempty"`
	// CaseTimeout bounds one case (default 60s).
	CaseTimeout time.Duration `yaml:"case_timeout" json:"case_timeout"`
	// Restarts: the harness can replace a role's instance with a fresh one
	// (target.Restarter): the profile has a launch section, or the harness
	// started the instances itself (conformance/launch). Not a profile key:
	// Config sets it from its launch section. Cases that take an instance
	// down or poison it (the label needs:restart) need it (CONTRACT
	// section 4 "A restart").
	Restarts bool `yaml:"-" json:"-"`
	// UntrustedHost is a host the harness may listen on, on free ports,
	// none of which the target trusts as a peer (its trusted producers and
	// consumer agents name only exact host:port entries there, none the
	// harness picks; CONTRACT SE-3), e.g. "127.0.0.1". The SE-3 and SE-4
	// cases point references and consumer agents at such a listener and
	// check that nothing connects to it. Empty: those checks are not
	// verifiable.
	UntrustedHost string `yaml:"untrusted_host" json:"untrusted_host"`
	// AgentFormat declares the format of a tcp consumer's
	// TransferEncoderCacheRequest.consumer_agent, so the SE-3 case can
	// name an untrusted agent: "baton-xfer-v1" (baton's agent metadata:
	// "BXMD", version 1, backend 2, name, "host:port") or "" (opaque: that
	// check is not verifiable).
	AgentFormat string `yaml:"agent_format" json:"agent_format"`
	// TLS, when set, makes every connection TLS and declares the tls
	// feature: SE-1 applies (tls.go). nil: plaintext.
	TLS *TLS `yaml:"tls,omitempty" json:"tls,omitempty"`
	// Authorization, when set, declares the authorization feature (SE-2
	// applies) and carries the operator's credential, which every
	// connection of the harness presents (tls.go).
	Authorization *Authorization `yaml:"authorization,omitempty" json:"authorization,omitempty"`
}

// AgentFormatBatonXferV1 is the one consumer_agent format a profile may
// declare (Profile.AgentFormat): baton's tcp transfer-agent metadata.
const AgentFormatBatonXferV1 = "baton-xfer-v1"

// Implementation is the vendor's description of the engine under test. Every
// field is free text; none is checked.
type Implementation struct {
	// Vendor is the organization that ships the engine ("Example Corp").
	Vendor string `yaml:"vendor" json:"vendor"`
	// Product is the engine's name ("example-serve").
	Product string `yaml:"product" json:"product"`
	// Version is the engine's version under test ("2.4.1").
	Version string `yaml:"version" json:"version"`
	// Contact is who answers for the submission (an e-mail address or URL).
	Contact string `yaml:"contact" json:"contact"`
}

// Topologies a profile may declare (CONTRACT section 1).
const (
	// TopologyEPD is E+PD: client -> E, then client -> PD.
	TopologyEPD = "E+PD"
	// TopologyEPPD is E+P+D: client -> E, then P, then D.
	TopologyEPPD = "E+P+D"
)

// ReferenceFormatBatonJSONv1 is the one opaque-state format a profile may
// declare (Profile.ReferenceFormat): baton's JSON with id, items[].hash, tag.
const ReferenceFormatBatonJSONv1 = "baton-json-v1"

// Levels in order: each includes the ones before it (CONTRACT section 5).
var Levels = []string{"core", "lifecycle", "faults"}

// ClaimedLevels returns the levels a profile's claim covers, lowest first
// ("" claims "core"); false for an unknown level.
func (p Profile) ClaimedLevels() ([]string, bool) {
	claim := p.Level
	if claim == "" {
		claim = "core"
	}
	for i, l := range Levels {
		if l == claim {
			return Levels[:i+1], true
		}
	}
	return nil, false
}

// HasTopology reports whether the profile declares topology name.
func (p Profile) HasTopology(name string) bool {
	for _, t := range p.Topologies {
		if t == name {
			return true
		}
	}
	return false
}

// Target is an implementation under test.
type Target interface {
	// Profile returns the declared profile.
	Profile() Profile
	// Engine returns the endpoint serving role, or false when the target has none.
	Engine(role Role) (Engine, bool)
}

// GenerateResult is one collected Generate stream.
type GenerateResult struct {
	// Responses in arrival order.
	Responses []*pb.GenerateResponse
	// Status is the stream's final gRPC status (OK when it closed cleanly).
	Status *status.Status
	// Trailer is the stream's trailing metadata.
	Trailer metadata.MD
	// Overflow: the target streamed more than the harness keeps of one
	// Generate (MaxGenerateResponses, MaxGenerateBytes); the stream was
	// cancelled there, Responses hold what was kept and Status is
	// CodeStreamedTooMuch. A target's wrong answer, whatever the case
	// expected.
	Overflow bool
}

// Code is the stream's final gRPC code.
func (r *GenerateResult) Code() codes.Code { return r.Status.Code() }

// TokenIDs returns every token id emitted, in order.
func (r *GenerateResult) TokenIDs() []uint32 {
	var ids []uint32
	for _, resp := range r.Responses {
		if tok := resp.GetToken(); tok != nil {
			for _, t := range tok.GetTokens() {
				ids = append(ids, t.GetTokenId())
			}
		}
	}
	return ids
}

// Text returns the concatenated token text.
func (r *GenerateResult) Text() string {
	var s string
	for _, resp := range r.Responses {
		if tok := resp.GetToken(); tok != nil {
			s += tok.GetText()
		}
	}
	return s
}

// EncoderReady returns the EncoderReady event, or nil.
func (r *GenerateResult) EncoderReady() *pb.EncoderReady {
	for _, resp := range r.Responses {
		if er := resp.GetEncoderReady(); er != nil {
			return er
		}
	}
	return nil
}

// Finished returns the GenerationFinished event, or nil.
func (r *GenerateResult) Finished() *pb.GenerationFinished {
	for _, resp := range r.Responses {
		if f := resp.GetFinished(); f != nil {
			return f
		}
	}
	return nil
}

// EngineError returns the terminal EngineError event, or nil.
func (r *GenerateResult) EngineError() *pb.EngineError {
	for _, resp := range r.Responses {
		if e := resp.GetError(); e != nil {
			return e
		}
	}
	return nil
}

// Usage returns the Usage of the final response, or nil.
func (r *GenerateResult) Usage() *pb.Usage {
	if len(r.Responses) == 0 {
		return nil
	}
	return r.Responses[len(r.Responses)-1].GetUsage()
}
