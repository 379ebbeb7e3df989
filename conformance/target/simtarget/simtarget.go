// Package simtarget is the Target adapter for baton's simulator: E and one
// PD answering openengine.v1 requests synchronously from a fault-free
// simulated world (sim.Driver) that runs the real engine/handoff core. The
// wire is mapped by hand: references are the core's own sealed
// baton-json-v1 references (handoff.Reference, HMAC under a per-target
// key), parsed and verified with the core's ParseReference and Verify, so
// SU-4/SU-5 answers come from the same code the reference engine runs.
// Encoder numerics are a stand-in: an item's content hash is SHA-256 of its
// bytes and a consume's tokens derive from that hash and the prompt.
//
// It needs no network and no processes, so a property suite can run
// thousands of checks against it (conformance/props).
package simtarget

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/handoff"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"github.com/baton-dev/baton/sim"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Backend is the backend name the simulated engines advertise and accept.
const Backend = "sim"

// itemRows and itemCols are the stand-in embedding shape of every item
// (float32, so 256 bytes of payload per item).
const (
	itemRows = 1
	itemCols = 64
)

// Options configure New.
type Options struct {
	// Seed seeds the world (entry and instance ids, delays).
	Seed uint64
	// Driver configures the world (backend, buffers, quota, TTL, a driver mutant).
	Driver sim.DriverConfig
	// Faults makes the target a target.FaultInjector and target.Restarter
	// (Profile.FaultProxy): transfer faults are the world's directed faults
	// (sim.DirectedFault) and a consumer restart is a simulated crash and
	// reboot. Needs the transfer backend (the default).
	Faults bool
}

// Target is the simulator behind the Target interface.
type Target struct {
	mu       sync.Mutex // one call at a time: the world is single-threaded
	d        *sim.Driver
	key      []byte
	consID   string
	profile  target.Profile
	engines  map[target.Role]target.Engine
	maxToken uint32
	// changed is closed and replaced after every call (TransferCalls waits on it).
	changed chan struct{}
	// hold is the real-time hold of a FaultDelay (SetTransferFaults).
	hold time.Duration
}

// New returns a target over a fresh world. Errors: bad driver settings.
func New(opts Options) (*Target, error) {
	d, err := sim.NewDriver(opts.Seed, opts.Driver)
	if err != nil {
		return nil, err
	}
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], opts.Seed)
	key := sha256.Sum256(append([]byte("baton simtarget key\x00"), seed[:]...))
	cons := sha256.Sum256(append([]byte("baton simtarget consumer\x00"), seed[:]...))
	h := hex.EncodeToString(cons[:16])
	t := &Target{d: d, key: key[:], consID: h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], changed: make(chan struct{})}
	t.profile = target.Profile{
		Name: "baton simulator (sim.Driver, E+PD)", Level: "core", Topologies: []string{target.TopologyEPD}, Backends: []string{Backend},
		Observables: true, ReferenceFormat: target.ReferenceFormatBatonJSONv1, CaseTimeout: time.Minute,
	}
	if opts.Faults {
		if opts.Driver.Backend != "" && opts.Driver.Backend != sim.BackendTransfer {
			return nil, fmt.Errorf("simtarget: Faults needs the transfer backend, not %q", opts.Driver.Backend)
		}
		t.profile.Name = "baton simulator (sim.Driver, E+PD, directed transfer faults)"
		t.profile.FaultProxy = true
	}
	t.engines = map[target.Role]target.Engine{target.RoleProducer: &engine{t: t, producer: true}, target.RoleConsumer: &engine{t: t}}
	return t, nil
}

// Profile implements target.Target.
func (t *Target) Profile() target.Profile { return t.profile }

// Engine implements target.Target: producer and consumer.
func (t *Target) Engine(role target.Role) (target.Engine, bool) {
	e, ok := t.engines[role]
	return e, ok
}

// Steps is the number of simulator events run so far.
func (t *Target) Steps() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.d.Steps()
}

// CheckHistory checks the client-visible history of every call so far
// (sim.CheckHistory); "" when it is linearizable.
func (t *Target) CheckHistory() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.d.CheckHistory()
}

// engine is E (producer) or PD.
type engine struct {
	t        *Target
	producer bool
}

func statusOf(c handoff.Code, msg string) *status.Status { return status.New(codes.Code(c), msg) }

func failed(st *status.Status) *target.GenerateResult {
	return &target.GenerateResult{Status: st, Trailer: metadata.MD{}}
}

// driverError turns a driver failure (a checker fired) into INTERNAL.
func driverError(err error) *status.Status {
	return status.New(codes.Internal, err.Error())
}

// Generate implements target.Engine: a publish on E, a consume on PD.
func (e *engine) Generate(ctx context.Context, req *pb.GenerateRequest) (*target.GenerateResult, error) {
	if err := ctx.Err(); err != nil {
		return failed(status.FromContextError(err)), nil // C-1: cancelled before submission
	}
	t := e.t
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.notify()
	if e.producer {
		return t.publish(req), nil
	}
	return t.consume(ctx, req), nil
}

func (t *Target) publish(req *pb.GenerateRequest) *target.GenerateResult {
	pub := req.GetEncoder().GetPublish()
	if pub == nil {
		return failed(status.New(codes.FailedPrecondition, "L-4 the producer serves encoder.publish only"))
	}
	if len(req.GetMedia()) == 0 {
		return failed(status.New(codes.InvalidArgument, "a publish carries at least one image"))
	}
	var items []handoff.ItemMeta
	var encoded []*pb.EncodedItem
	for _, m := range req.GetMedia() {
		if m.GetModality() != pb.Modality_MODALITY_IMAGE {
			return failed(status.New(codes.Unimplemented, "L-3 only images"))
		}
		sum := sha256.Sum256(m.GetRawBytes())
		h := hex.EncodeToString(sum[:])
		items = append(items, handoff.ItemMeta{ContentHash: h, Rows: itemRows, Cols: itemCols})
		encoded = append(encoded, &pb.EncodedItem{ContentHash: h, EmbeddingRows: itemRows, Modality: pb.Modality_MODALITY_IMAGE})
	}
	ref := handoff.Reference{Backend: Backend, ProducerInstanceID: t.d.ProducerInstanceID(), Items: items}
	entry, exp, a, err := t.d.Publish(ref.PayloadBytes(), int64(pub.GetTtlMs()))
	if err != nil {
		return failed(driverError(err))
	}
	if a.Code != handoff.CodeOK {
		return failed(statusOf(a.Code, "publish refused by the simulated producer"))
	}
	ref.EntryID, ref.ExpiresUnixMs = entry, exp
	wire := &pb.EncoderCacheRef{Backend: Backend, ProducerInstanceId: ref.ProducerInstanceID, OpaqueState: ref.Seal(t.key)}
	return &target.GenerateResult{
		Responses: []*pb.GenerateResponse{{RequestId: req.GetRequestId(),
			Event: &pb.GenerateResponse_EncoderReady{EncoderReady: &pb.EncoderReady{Ref: wire, Items: encoded}}, Usage: &pb.Usage{}}},
		Status: status.New(codes.OK, ""), Trailer: metadata.MD{},
	}
}

// parse decodes and verifies a wire reference in the contract's order:
// L-1, SU-4, H-3 (ParseReference), N-1 (backend), SU-5 (Verify).
func (t *Target) parse(wire *pb.EncoderCacheRef) (handoff.Reference, *status.Status) {
	ref, err := handoff.ParseReference(wire.GetBackend(), wire.GetProducerInstanceId(), handoff.Endpoint{Host: wire.GetProducerEndpoint().GetHost(), Port: wire.GetProducerEndpoint().GetPort(), Protocol: wire.GetProducerEndpoint().GetProtocol()}, wire.GetOpaqueState(), 0)
	if err == nil && ref.Backend != Backend {
		err = fmt.Errorf("%w: N-1 backend %.40q", handoff.ErrBackendNotAccepted, ref.Backend)
	}
	if err == nil {
		err = ref.Verify(t.key)
	}
	if err != nil {
		rule, code := handoff.Classify(err)
		return ref, statusOf(code, rule+" "+err.Error())
	}
	return ref, nil
}

// consume answers a Generate on PD: a text-only request (no encoder
// options, no media) is answered from its prompt and never touches the world (N-2);
// a consume of a reference runs through the world (consumeEntry). Called
// and returns with t.mu held.
func (t *Target) consume(ctx context.Context, req *pb.GenerateRequest) *target.GenerateResult {
	if req.GetEncoder() == nil && len(req.GetMedia()) == 0 && req.GetPrompt() != "" {
		return t.answer(req, nil)
	}
	wire := req.GetEncoder().GetConsume()
	if wire == nil {
		return failed(status.New(codes.FailedPrecondition, "L-4 the consumer serves encoder.consume only"))
	}
	ref, st := t.parse(wire)
	if st != nil {
		return failed(st)
	}
	a, err := t.consumeEntry(ctx, ref.EntryID)
	if err != nil {
		return failed(driverError(err))
	}
	if a.Code != handoff.CodeOK {
		return failed(statusOf(a.Code, "consume refused by the simulated consumer"))
	}
	return t.answer(req, ref.Items)
}

// answer is the stand-in generation: up to 16 tokens (max_tokens) derived
// from the items' content hashes and the prompt.
func (t *Target) answer(req *pb.GenerateRequest, items []handoff.ItemMeta) *target.GenerateResult {
	n := req.GetStopping().GetMaxTokens()
	if n == 0 || n > 16 {
		n = 16
	}
	seed := sha256.New()
	for _, it := range items {
		seed.Write([]byte(it.ContentHash))
	}
	seed.Write([]byte(req.GetPrompt()))
	sum := seed.Sum(nil)
	var toks []*pb.TokenInfo
	for i := uint32(0); i < n; i++ {
		toks = append(toks, &pb.TokenInfo{TokenId: uint32(sum[i%32]) + 256*(i/32)})
	}
	return &target.GenerateResult{
		Responses: []*pb.GenerateResponse{
			{RequestId: req.GetRequestId(), Event: &pb.GenerateResponse_Token{Token: &pb.TokenOutput{Tokens: toks}}},
			{RequestId: req.GetRequestId(), Event: &pb.GenerateResponse_Finished{Finished: &pb.GenerationFinished{Reason: pb.FinishReason_FINISH_REASON_LENGTH}},
				Usage: &pb.Usage{PromptTokens: 1, CompletionTokens: n, TotalTokens: n + 1}},
		},
		Status: status.New(codes.OK, ""), Trailer: metadata.MD{},
	}
}

// GetServerInfo implements target.Engine.
func (e *engine) GetServerInfo(ctx context.Context) (*pb.ServerInfo, error) {
	e.t.mu.Lock()
	defer e.t.mu.Unlock()
	id, role := e.t.consID, pb.EngineRole_ENGINE_ROLE_AGGREGATED
	if e.producer {
		id = e.t.d.ProducerInstanceID()
	}
	return &pb.ServerInfo{EngineName: "baton-sim", EngineRole: role, InstanceId: id, SchemaRevision: 1}, nil
}

// GetModelInfo implements target.Engine.
func (e *engine) GetModelInfo(ctx context.Context, model string) (*pb.ModelInfo, error) {
	role := pb.EncoderRole_ENCODER_ROLE_CONSUMER
	if e.producer {
		role = pb.EncoderRole_ENCODER_ROLE_PRODUCER
	}
	return &pb.ModelInfo{ModelId: "baton-sim", Encoder: &pb.EncoderCapabilities{Role: role, Backends: []string{Backend}, SupportsAbortCleanup: proto.Bool(true)}}, nil
}

// GetLoad implements target.Engine: the CONTRACT section 4 observables,
// and on the consumer the optional encoder.quarantine.entered, as the
// reference engine offers it (the simulator's consumer, like the
// engine's, ends a quarantine at once when nothing can land and the
// connection that carried the request closed with its last use).
func (e *engine) GetLoad(ctx context.Context) (*pb.LoadInfo, error) {
	e.t.mu.Lock()
	defer e.t.mu.Unlock()
	l := e.t.d.ConsumerLoad(0)
	if e.producer {
		l = e.t.d.ProducerLoad()
	}
	fields := map[string]any{
		"encoder.exports.entries": float64(l.ExportsEntries), "encoder.exports.bytes": float64(l.ExportsBytes),
		"encoder.receives.inflight": float64(l.ReceivesInflight), "encoder.quarantine.buffers": float64(l.QuarantineBuffers),
		"encoder.quarantine.bytes": float64(l.QuarantineBytes), "encoder.cleanup.pending": float64(l.CleanupPending),
		"encoder.storage.live_batches": float64(0),
	}
	if !e.producer {
		fields["encoder.quarantine.entered"] = float64(l.QuarantinesEntered)
	}
	attrs, err := structpb.NewStruct(fields)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pb.LoadInfo{Attributes: attrs}, nil
}

func (e *engine) health() *handoff.Health {
	if e.producer {
		return e.t.d.ProducerHealth()
	}
	return e.t.d.ConsumerHealth(0)
}

// Health implements target.Engine: the core's Health of the node.
func (e *engine) Health(ctx context.Context) (*pb.HealthResponse, error) {
	e.t.mu.Lock()
	defer e.t.mu.Unlock()
	if f := e.t.d.Failure(); f != "" {
		return nil, status.Error(codes.Internal, f)
	}
	st, checks := e.health().State()
	resp := &pb.HealthResponse{State: pb.HealthState(st)}
	for _, c := range checks {
		resp.Checks = append(resp.Checks, &pb.HealthCheck{Name: c.Name, State: pb.HealthState(c.State), Message: c.Message})
	}
	return resp, nil
}

// Abort implements target.Engine: Abort(encoder_cache) on E (SU-3, SU-4).
func (e *engine) Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	t := e.t
	t.mu.Lock()
	defer t.mu.Unlock()
	wire := req.GetEncoderCache()
	if !e.producer || wire == nil {
		return nil, status.Error(codes.FailedPrecondition, "L-4 only the producer releases encoder outputs")
	}
	ref, st := t.parse(wire)
	if st != nil {
		return nil, st.Err()
	}
	a, err := t.d.Release(ref.EntryID)
	if err != nil {
		return nil, driverError(err).Err()
	}
	if a.Code != handoff.CodeOK {
		return nil, statusOf(a.Code, "release refused by the simulated producer").Err()
	}
	if a.Aborted {
		return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ABORTED}, nil
	}
	return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED}, nil
}

// Shutdown implements target.Engine (S-1; on E the drain runs to its end, S-2).
func (e *engine) Shutdown(ctx context.Context, req *pb.ShutdownRequest) (*pb.ShutdownResponse, error) {
	t := e.t
	t.mu.Lock()
	defer t.mu.Unlock()
	var st handoff.ShutdownStatus
	var err error
	if e.producer {
		st, err = t.d.ShutdownProducer(req.GetExpectedInstanceId())
	} else {
		st, err = t.d.ConsumerHealth(0).DecideShutdown(req.GetExpectedInstanceId(), t.consID)
	}
	if err != nil {
		if _, code := handoff.Classify(err); code != handoff.CodeInternal {
			return nil, statusOf(code, err.Error()).Err()
		}
		return nil, driverError(err).Err()
	}
	return &pb.ShutdownResponse{Status: pb.ShutdownStatus(st)}, nil
}
