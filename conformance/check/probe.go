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
// and speaks baton.encoder.v1: GetServerInfo must answer with a non-zero
// schema_revision (WIRE.md), and GetModelInfo(profile.Model) must carry
// ModelInfo.encoder with role ENCODER_ROLE_PRODUCER on the producer and
// ENCODER_ROLE_CONSUMER on the consumer and prefill endpoints. Each call is
// bounded by ProbeTimeout; endpoints are probed concurrently.
//
// It returns nil, or one error listing every problem, one per line, e.g.
//
//	check: endpoint unreachable: producer endpoint: GetServerInfo = code Unavailable: connection refused (each probe call waits at most 5s)
//	check: endpoint does not speak baton.encoder.v1: consumer endpoint: ModelInfo.encoder (field 100) is missing (model "tiny"; want role ENCODER_ROLE_CONSUMER)
//
// wrapping ErrNoEndpoints, ErrUnreachable or ErrNotEncoderTarget. The CLI
// exits 3 on it (reports.ExitSetup).
func Probe(ctx context.Context, tg target.Target) error {
	type served struct {
		role   target.Role
		engine target.Engine
	}
	var roles []served
	for _, r := range probeRoles {
		if e, ok := tg.Engine(r); ok && e != nil {
			roles = append(roles, served{r, e})
		}
	}
	if len(roles) == 0 {
		return fmt.Errorf("%w (profile %q: want endpoints for producer, consumer, ...)", ErrNoEndpoints, tg.Profile().Name)
	}
	model := tg.Profile().Model
	errs := make([]error, len(roles))
	var wg sync.WaitGroup
	for i, s := range roles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = probeEngine(ctx, s.role, s.engine, model)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// probeEngine checks one endpoint; the error names the sentinel first, then
// the endpoint and what was missing.
func probeEngine(ctx context.Context, role target.Role, e target.Engine, model string) error {
	callCtx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	si, err := e.GetServerInfo(callCtx)
	cancel()
	if err != nil {
		return callError(role, "GetServerInfo", err)
	}
	if si.GetSchemaRevision() == 0 {
		return fmt.Errorf("%w: %s endpoint: ServerInfo.schema_revision is 0 (want non-zero, 1 for openengine.v1)", ErrNotEncoderTarget, role)
	}
	want, checked := wantEncoderRole[role]
	if !checked {
		return nil
	}
	callCtx, cancel = context.WithTimeout(ctx, ProbeTimeout)
	mi, err := e.GetModelInfo(callCtx, model)
	cancel()
	if err != nil {
		return callError(role, fmt.Sprintf("GetModelInfo(model %q)", model), err)
	}
	caps := mi.GetEncoder()
	if caps == nil {
		return fmt.Errorf("%w: %s endpoint: ModelInfo.encoder (field 100) is missing (model %q; want role %s)", ErrNotEncoderTarget, role, model, want)
	}
	if got := caps.GetRole(); got != want {
		return fmt.Errorf("%w: %s endpoint: ModelInfo.encoder.role = %s; want %s (model %q)", ErrNotEncoderTarget, role, got, want, model)
	}
	return nil
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
