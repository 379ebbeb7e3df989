package check

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ProbeTimeout bounds each probe call (GetServerInfo, GetModelInfo) to one
// endpoint, so an unreachable or silent endpoint fails the probe in seconds
// instead of hanging. Endpoints are probed concurrently.
const ProbeTimeout = 5 * time.Second

// Probe errors; the error Probe returns wraps one or more of them (test with
// errors.Is) and names each endpoint and what was missing.
var (
	// ErrNoEndpoints: the target serves no role at all.
	ErrNoEndpoints = errors.New("check: target serves no endpoint")
	// ErrUnreachable: an endpoint did not answer within ProbeTimeout
	// (gRPC UNAVAILABLE or DEADLINE_EXCEEDED).
	ErrUnreachable = errors.New("check: endpoint unreachable")
	// ErrNotEncoderTarget: an endpoint answered but does not speak the
	// baton.encoder.v1 extension of openengine.v1 (UNIMPLEMENTED control
	// RPCs, ServerInfo.schema_revision 0, ModelInfo.encoder missing, or the
	// wrong EncoderCapabilities.role for its role).
	ErrNotEncoderTarget = errors.New("check: endpoint does not speak baton.encoder.v1")
)

// probeRoles is the order roles are probed and reported in.
var probeRoles = []target.Role{target.RoleProducer, target.RoleConsumer, target.RolePrefill, target.RoleDecode, target.RoleBaseline}

// wantEncoderRole is the EncoderCapabilities.role each role must advertise
// (CONTRACT section 1): E publishes, PD and P consume. D and the aggregated
// baseline take no part in the handoff, so their ModelInfo.encoder is not
// checked.
var wantEncoderRole = map[target.Role]pb.EncoderRole{
	target.RoleProducer: pb.EncoderRole_ENCODER_ROLE_PRODUCER,
	target.RoleConsumer: pb.EncoderRole_ENCODER_ROLE_CONSUMER,
	target.RolePrefill:  pb.EncoderRole_ENCODER_ROLE_CONSUMER,
}

// Probe checks, before any case runs, that every endpoint tg serves answers
// and speaks baton.encoder.v1, and that the endpoints are what the profile
// says (the preflight):
//
//   - GetServerInfo must answer with a non-zero schema_revision (WIRE.md),
//     and GetModelInfo(profile.Model) must answer; on the producer, consumer
//     and prefill endpoints it must carry ModelInfo.encoder with a role
//     (ErrUnreachable, ErrNotEncoderTarget);
//   - each endpoint advertises the ServerInfo.engine_role and
//     ModelInfo.encoder.role of its role (CONTRACT section 1: the baseline
//     is AGGREGATED/NONE, so a baseline pointed at the consumer is caught);
//     every declared topology has its endpoints; every declared backend is
//     known and accepted by every consumer, and the producer publishes on
//     one of them; every endpoint runs the same preset
//     (ServerInfo.extra["baton.preset"]) and model (GetModelInfo model_id,
//     served_model_name); with observables: true every endpoint but D
//     carries the CONTRACT section 4 counters; with test_hooks: true the
//     producer and the baseline honour a test hook (baton.omit_content_hash,
//     baton.encoder_fail: effects the answer shows, no timing); over the
//     shared directory each consumer can claim a fresh entry of the
//     producer (a publish of one tiny image, released after). Each problem
//     wraps ErrProfileMismatch.
//
// Each call is bounded by ProbeTimeout; endpoints are probed concurrently,
// and the preflight takes well under a second on the tiny preset.
//
// It returns nil, or one error listing every problem, one per line, e.g.
//
//	check: endpoint unreachable: producer endpoint: GetServerInfo = code Unavailable: connection refused (each probe call waits at most 5s)
//	check: the profile does not match the target: backends [shared_dir]: the consumer 127.0.0.1:7102 does not accept shared_dir (ModelInfo.encoder.backends [tcp])
//
// wrapping ErrNoEndpoints, ErrUnreachable, ErrNotEncoderTarget or
// ErrProfileMismatch. The CLI exits 3 on it (reports.ExitSetup).
func Probe(ctx context.Context, tg target.Target) error {
	var infos []endpointInfo
	for _, r := range probeRoles {
		if e, ok := tg.Engine(r); ok && e != nil {
			infos = append(infos, endpointInfo{role: r, engine: e})
		}
	}
	if len(infos) == 0 {
		return fmt.Errorf("%w (profile %q: want endpoints for producer, consumer, ...)", ErrNoEndpoints, tg.Profile().Name)
	}
	profile := tg.Profile()
	errs := make([]error, len(infos))
	var wg sync.WaitGroup
	for i := range infos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = probeEngine(ctx, &infos[i], profile.Model)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var problems []error
	for _, line := range preflight(ctx, profile, infos) {
		problems = append(problems, fmt.Errorf("%w: %s", ErrProfileMismatch, line))
	}
	return errors.Join(problems...)
}

// probeEngine asks one endpoint GetServerInfo and GetModelInfo and fills
// ei; the error names the sentinel first, then the endpoint and what was
// missing.
func probeEngine(ctx context.Context, ei *endpointInfo, model string) error {
	role, e := ei.role, ei.engine
	callCtx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	si, err := e.GetServerInfo(callCtx)
	cancel()
	if err != nil {
		return callError(role, "GetServerInfo", err)
	}
	if si.GetSchemaRevision() == 0 {
		return fmt.Errorf("%w: %s endpoint: ServerInfo.schema_revision is 0 (want non-zero, 1 for openengine.v1)", ErrNotEncoderTarget, role)
	}
	ei.server = si
	callCtx, cancel = context.WithTimeout(ctx, ProbeTimeout)
	mi, err := e.GetModelInfo(callCtx, model)
	cancel()
	if err != nil {
		return callError(role, fmt.Sprintf("GetModelInfo(model %q)", model), err)
	}
	ei.model = mi
	want, checked := wantEncoderRole[role]
	if !checked {
		return nil
	}
	caps := mi.GetEncoder()
	if caps == nil {
		return fmt.Errorf("%w: %s endpoint: ModelInfo.encoder (field 100) is missing (model %q; want role %s)", ErrNotEncoderTarget, role, model, want)
	}
	if caps.GetRole() == pb.EncoderRole_ENCODER_ROLE_UNSPECIFIED {
		return fmt.Errorf("%w: %s endpoint: ModelInfo.encoder.role = %s; want %s (model %q)", ErrNotEncoderTarget, role, caps.GetRole(), want, model)
	}
	return nil // a definite other role is the preflight's (a profile pointing at the wrong process)
}

// callError classifies a failed probe call: no answer (UNAVAILABLE,
// DEADLINE_EXCEEDED, or the caller's context ended) is ErrUnreachable; an
// UNIMPLEMENTED Control service is ErrNotEncoderTarget; anything else is
// wrapped as is.
func callError(role target.Role, call string, err error) error {
	st, _ := status.FromError(err)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		st = status.FromContextError(err)
	}
	switch {
	case st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded || st.Code() == codes.Canceled:
		return fmt.Errorf("%w: %s endpoint: %s = code %s: %s (each probe call waits at most %v)", ErrUnreachable, role, call, st.Code(), st.Message(), ProbeTimeout)
	case st.Code() == codes.Unimplemented:
		return fmt.Errorf("%w: %s endpoint: %s = code Unimplemented: %s (want the openengine.v1 Control service)", ErrNotEncoderTarget, role, call, st.Message())
	default:
		return fmt.Errorf("check: %s endpoint: %s: %w", role, call, err)
	}
}
