package server

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/engine/cache"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Version is the reference engine's version string.
var Version = "0.1.0"

// control implements openengine.v1.Control.
type control struct {
	pb.UnimplementedControlServer
	e *Engine
}

func (e *Engine) encoderRole() pb.EncoderRole {
	switch e.cfg.Role {
	case RoleEncoder:
		return pb.EncoderRole_ENCODER_ROLE_PRODUCER
	case RolePD, RolePrefill:
		return pb.EncoderRole_ENCODER_ROLE_CONSUMER
	default:
		return pb.EncoderRole_ENCODER_ROLE_NONE
	}
}

// engineRole is ServerInfo.engine_role (CONTRACT section 1): PREFILL for P,
// DECODE for D, AGGREGATED for the others.
func (e *Engine) engineRole() pb.EngineRole {
	switch e.cfg.Role {
	case RolePrefill:
		return pb.EngineRole_ENGINE_ROLE_PREFILL
	case RoleDecode:
		return pb.EngineRole_ENGINE_ROLE_DECODE
	default:
		return pb.EngineRole_ENGINE_ROLE_AGGREGATED
	}
}

// GetServerInfo: a random instance id per start, schema revision 1.
func (s *control) GetServerInfo(ctx context.Context, _ *pb.GetServerInfoRequest) (*pb.ServerInfo, error) {
	e := s.e
	fields := map[string]any{
		"baton.role": string(e.cfg.Role), "baton.preset": e.preset.Name, "baton.profile": "baton.encoder.v1",
		"baton.reference_format": "baton-json-v1",
	}
	for k, v := range e.listeners() { // SE-1: where the other listeners serve
		fields[k] = v
	}
	extra, _ := structpb.NewStruct(fields)
	return &pb.ServerInfo{
		EngineName: "baton-reference", EngineVersion: Version, EngineRole: e.engineRole(),
		InstanceId: e.instanceID, SupportedModels: []string{ModelName(e.preset.Name)},
		SchemaRevision: 1, MinimumClientRevision: 1, SchemaRelease: "openengine.v1+baton.encoder.v1", Extra: extra,
	}, nil
}

// GetModelInfo advertises the encoder capabilities (N-1).
func (s *control) GetModelInfo(ctx context.Context, req *pb.GetModelInfoRequest) (*pb.ModelInfo, error) {
	e := s.e
	if m := req.GetModel(); m != "" && m != ModelName(e.preset.Name) {
		return nil, e.status(fmt.Errorf("%w: %.60q not served (serving %s)", errModelNotFound, m, ModelName(e.preset.Name)))
	}
	caps := &pb.EncoderCapabilities{
		Role:                      e.encoderRole(),
		MaxReferenceBytes:         proto.Uint32(handoff.MaxOpaqueStateBytes),
		MaxDecodePreparationBytes: proto.Uint32(handoff.MaxDecodePreparationBytes),
		Modalities:                []pb.Modality{pb.Modality_MODALITY_IMAGE},
	}
	switch e.cfg.Role {
	case RoleEncoder:
		caps.Backends = []string{e.cfg.Backend}
		caps.SupportsAbortCleanup = proto.Bool(true)
	case RolePD, RolePrefill:
		caps.Backends = append([]string(nil), e.cfg.AcceptBackends...)
		caps.RequiresHandoff = proto.Bool(true)
	}
	return &pb.ModelInfo{
		ModelId: ModelName(e.preset.Name), ServedModelName: ModelName(e.preset.Name),
		MaxContextLength: proto.Uint32(lm.DefaultMaxContextTokens), MaxOutputTokens: proto.Uint32(lm.DefaultMaxContextTokens),
		TokenizerModes: []string{"text", "token_ids"}, SupportsTextInput: proto.Bool(e.cfg.Role != RoleEncoder),
		SupportsTokenIdsInput: proto.Bool(e.cfg.Role != RoleEncoder), SupportsLora: proto.Bool(false),
		SupportsMultimodal: proto.Bool(true),
		Generation:         &pb.GenerationConfig{EosTokenIds: []uint32{lm.EOSID}, DefaultMaxTokens: proto.Uint32(lm.DefaultMaxTokens)},
		Encoder:            caps,
	}, nil
}

// Observables returns the CONTRACT section 4 counters after a look at which
// published entries consumers claimed.
func (e *Engine) Observables() map[string]float64 {
	e.observeClaims()
	e.mu.Lock()
	defer e.mu.Unlock()
	qBuffers, qBytes := e.receives.Quarantine()
	// The producer's quarantined sources count too, and D's KV READ buffers.
	srcBuffers, srcBytes := e.sourceQuarantine()
	kvBuffers, kvBytes := e.receives.UncountedQuarantine()
	qBuffers += srcBuffers + kvBuffers
	qBytes += srcBytes + kvBytes
	out := map[string]float64{
		"encoder.exports.entries":       float64(e.table.Entries()),
		"encoder.exports.bytes":         float64(e.table.HeldBytes()),
		"encoder.receives.inflight":     float64(e.receives.Inflight()),
		"encoder.quarantine.buffers":    float64(qBuffers),
		"encoder.quarantine.bytes":      float64(qBytes),
		"encoder.quarantine.entered":    float64(e.quarantinesEntered), // quarantines ever entered: one Q-6 ended at once still counts
		"encoder.cleanup.pending":       float64(e.cleanups),
		"encoder.exports.published":     float64(e.table.Counters().Published),
		"encoder.exports.consumed":      float64(e.table.Counters().Consumed),
		"encoder.exports.released":      float64(e.table.Counters().Released),
		"encoder.exports.expired":       float64(e.table.Counters().Expired),
		"kv.sessions.live":              float64(e.kv.Live()),               // P's KV sessions awaiting D (E+P+D)
		"encoder.decode.inflight_bytes": float64(e.decodes.inflight.Load()), // SE-4: decoded bytes reserved now
		"encoder.decode.waiting":        float64(e.decodes.waiting.Load()),  // SE-4: requests waiting for room
		"encoder.decode.refused":        float64(e.decodes.refused.Load()),  // SE-4: requests refused RESOURCE_EXHAUSTED
	}
	for k, v := range e.exec.observables() { // encoder.storage.live_batches and executor.*
		out[k] = v
	}
	return out
}

// sourceQuarantine returns the producer's quarantined transfer sources
// and their bytes: those its store keeps, where the store quarantines
// sources itself (tcp, cuda_ipc), so the observable shows what is kept,
// not what the table decided; else the table's count. Called with e.mu held.
func (e *Engine) sourceQuarantine() (int, int64) {
	if s, ok := e.store.(cache.Quarantining); ok {
		return s.QuarantinedSources()
	}
	c := e.table.Counters()
	return int(c.Quarantined), c.QuarantinedBytes
}

// GetLoad reports the observables in LoadInfo.attributes.
func (s *control) GetLoad(ctx context.Context, _ *pb.GetLoadRequest) (*pb.LoadInfo, error) {
	e := s.e
	obs := e.Observables()
	fields := map[string]any{}
	for k, v := range obs {
		fields[k] = v
	}
	attrs, err := structpb.NewStruct(fields)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "attributes: %v", err)
	}
	e.mu.Lock()
	running := uint32(e.runningN)
	e.mu.Unlock()
	return &pb.LoadInfo{InstanceId: e.instanceID, TimestampUnixNanos: proto.Uint64(uint64(e.now().UnixNano())), RunningRequests: proto.Uint32(running), QueuedRequests: proto.Uint32(0), Attributes: attrs}, nil
}

// Health reports READY, DRAINING (S-2) or NOT_READY with reasons.
func (s *control) Health(ctx context.Context, _ *pb.HealthRequest) (*pb.HealthResponse, error) {
	e := s.e
	e.mu.Lock()
	state, checks := e.health.State()
	e.mu.Unlock()
	resp := &pb.HealthResponse{State: pb.HealthState(state)}
	for _, c := range checks {
		resp.Checks = append(resp.Checks, &pb.HealthCheck{Name: c.Name, State: pb.HealthState(c.State), Message: c.Message})
	}
	resp.Checks = append(resp.Checks, e.gpuHealthCheck()...) // only when the engine uses a GPU
	return resp, nil
}

// Abort cancels a request, all requests, or releases a published entry (SU-3).
func (s *control) Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	e := s.e
	switch t := req.GetTarget().(type) {
	case *pb.AbortRequest_RequestId:
		if t.RequestId == "" {
			return nil, e.status(fmt.Errorf("%w: Abort: empty request_id", handoff.ErrBadRequest))
		}
		e.mu.Lock()
		cancel, ok := e.requests[t.RequestId]
		owner := e.owners[t.RequestId]
		e.mu.Unlock()
		if !ok {
			return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED}, nil
		}
		if err := e.authorizeAbort(ctx, t.RequestId, owner); err != nil {
			return nil, e.status(err) // SE-2: only the same caller (or the operator)
		}
		cancel()
		return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ABORTED}, nil
	case *pb.AbortRequest_AllRequests:
		if err := e.authorizeOperator(ctx, "Abort(all_requests)"); err != nil {
			return nil, e.status(err) // SE-2: an operator call
		}
		e.mu.Lock()
		n := len(e.requests)
		for _, cancel := range e.requests {
			cancel()
		}
		e.mu.Unlock()
		if n == 0 {
			return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED}, nil
		}
		return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ABORTED, Message: fmt.Sprintf("%d requests cancelled", n)}, nil
	case *pb.AbortRequest_KvSession:
		st, err := e.abortKVSession(t.KvSession)
		if err != nil {
			return nil, e.status(err)
		}
		return &pb.AbortResponse{Status: st}, nil
	case *pb.AbortRequest_EncoderCache:
		st, err := e.abortEncoderCache(ctx, t.EncoderCache, callerAddr(ctx))
		if err != nil {
			return nil, e.status(err)
		}
		if st == pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED && handoff.AnswerRelease(handoff.ReleaseAlreadyFinished, e.decisions()) == handoff.ReleaseAborted {
			st = pb.AbortStatus_ABORT_STATUS_ABORTED // the SU-3 mutant's answer (handoff.Mutants.ReleaseAlwaysAborted)
		}
		return &pb.AbortResponse{Status: st}, nil
	default:
		return nil, e.status(fmt.Errorf("%w: Abort: no target (want request_id, all_requests, kv_session or encoder_cache)", handoff.ErrBadRequest))
	}
}

// abortEncoderCache releases a published entry: ABORTED the first time,
// ALREADY_FINISHED after or once consumed or expired (SU-3); a malformed or
// foreign reference is INVALID_ARGUMENT (SU-4, SU-5). A release of an entry
// whose removal is in flight waits for it, bounded by ctx (release).
func (e *Engine) abortEncoderCache(ctx context.Context, wire *pb.EncoderCacheRef, caller string) (pb.AbortStatus, error) {
	if e.cfg.Role != RoleEncoder {
		return 0, fmt.Errorf("%w: L-4 only the producer releases encoder outputs", handoff.ErrWrongRole)
	}
	ref, err := handoff.ParseReference(wire.GetBackend(), wire.GetProducerInstanceId(), endpointOf(wire.GetProducerEndpoint()), wire.GetOpaqueState(), 0)
	if err != nil {
		return 0, err
	}
	if ref.Backend != e.store.Backend() {
		return 0, fmt.Errorf("%w: N-1 backend %.40q", handoff.ErrBackendNotAccepted, ref.Backend)
	}
	if ref.ProducerInstanceID != e.instanceID {
		return 0, fmt.Errorf("%w: SU-5 reference names producer %s, this is %s", handoff.ErrForeignReference, ref.ProducerInstanceID, e.instanceID)
	}
	if err := ref.Verify(e.store.Key()); err != nil {
		return 0, err
	}
	if e.producerDriver().ReturnLoan(ref.EntryID, caller) { // engine/producer
		// cuda_ipc: the consumer gives back what it copied; consumed (SU-3).
		return pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED, nil
	}
	if !e.cfg.Hooks.ReleaseAnswersFromTable {
		e.observeClaims()
	}
	// SU-3: an expired entry is ALREADY_FINISHED, and is collected now.
	e.expireBy(func(nowMs int64) []string { return e.table.ExpireBeforeRelease(ref.ExpiresUnixMs, nowMs) })
	out, err := e.producerDriver().Release(ctx, ref.EntryID) // SU-1, SU-3
	if err != nil {
		return 0, err
	}
	if out == handoff.ReleaseAborted {
		e.log.Info("SU-3 released", "entry", ref.EntryID)
		return pb.AbortStatus_ABORT_STATUS_ABORTED, nil
	}
	return pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED, nil
}

// TransferEncoderCache WRITEs a published entry into the consumer's
// registered buffers (tcp backend; CONTRACT ).
func (s *control) TransferEncoderCache(ctx context.Context, req *pb.TransferEncoderCacheRequest) (*pb.TransferEncoderCacheResponse, error) {
	resp, err := s.e.transferEncoderCache(ctx, req)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, s.e.status(err)
	}
	return resp, nil
}

// Shutdown applies SE-2 (with authorization on, only the operator may
// shut the engine down: PERMISSION_DENIED before anything else), then S-1,
// and starts the drain (S-2) on ACCEPTED.
func (s *control) Shutdown(ctx context.Context, req *pb.ShutdownRequest) (*pb.ShutdownResponse, error) {
	e := s.e
	if err := e.authorizeOperator(ctx, "Shutdown"); err != nil {
		return nil, e.status(err)
	}
	e.mu.Lock()
	st, err := e.health.DecideShutdownWith(req.GetExpectedInstanceId(), e.instanceID, e.decisions())
	e.mu.Unlock()
	if err != nil {
		return nil, e.status(err)
	}
	e.healthChanged() // DRAINING: grpc.health.v1 NOT_SERVING (SE-5)
	if st == handoff.ShutdownAccepted {
		timeout := e.cfg.DrainTimeout
		if req.DrainTimeoutMs != nil { // present, 0 included: 0 cancels running requests at once
			timeout = time.Duration(req.GetDrainTimeoutMs()) * time.Millisecond
		}
		e.log.Info("S-1 shutdown accepted", "drain_timeout_ms", timeout.Milliseconds())
		select {
		case e.shutdown <- timeout:
		default:
		}
		return &pb.ShutdownResponse{Status: pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED}, nil
	}
	return &pb.ShutdownResponse{Status: pb.ShutdownStatus_SHUTDOWN_STATUS_ALREADY_SHUTTING_DOWN}, nil
}

// listeners names the engine's listeners besides gRPC, for ServerInfo.extra
// (the harness checks each serves TLS, SE-1): "baton.listeners.metrics" and
// "baton.listeners.transfer" (host:port), present while they serve.
func (e *Engine) listeners() map[string]string {
	out := map[string]string{}
	e.mu.Lock()
	if e.metricsAddr != "" {
		out["baton.listeners.metrics"] = e.metricsAddr
	}
	e.mu.Unlock()
	if e.agent != nil {
		if md, err := e.agent.LocalMetadata(); err == nil {
			if addr, err := xfer.MetadataAddress(md); err == nil {
				out["baton.listeners.transfer"] = addr
			}
		}
	}
	return out
}
