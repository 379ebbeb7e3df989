package target

import (
	"context"
	"errors"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// TransferFault is one fault the harness's fault proxy can put on a control
// call from the consumer to the producer (conformance/faultproxy).
type TransferFault string

// Faults a FaultInjector can inject (CONTRACT Q-1: each is an uncertain
// outcome for the consumer, except where noted).
const (
	// FaultNone forwards the call untouched.
	FaultNone TransferFault = "none"
	// FaultDropRequest never forwards; the consumer's deadline passes.
	FaultDropRequest TransferFault = "drop-request"
	// FaultDropReply forwards, lets the producer complete, never answers:
	// the lost reply after the request took effect.
	FaultDropReply TransferFault = "drop-reply"
	// FaultDelay holds the reply past the consumer's deadline.
	FaultDelay TransferFault = "delay"
	// FaultCutConnection forwards, then cuts the consumer's connection.
	FaultCutConnection TransferFault = "cut"
	// FaultUnavailable answers UNAVAILABLE without forwarding.
	FaultUnavailable TransferFault = "unavailable"
	// FaultInvalidArgument answers INVALID_ARGUMENT without forwarding and
	// without the before-write trailer: still uncertain for the consumer.
	FaultInvalidArgument TransferFault = "invalid-argument"
)

// TransferCall is what the fault proxy saw of one call.
type TransferCall struct {
	// Method is the call's full gRPC method name
	// ("/openengine.v1.Control/TransferEncoderCache").
	Method string
	// Fault is the fault the proxy applied to the call (FaultNone: passed
	// through).
	Fault TransferFault
	// UpstreamReached: the producer received the call (and so may have acted on it).
	UpstreamReached bool
	// UpstreamCode is the producer's gRPC code name when it answered ("OK", "INVALID_ARGUMENT"...).
	UpstreamCode string
}

// FaultInjector is implemented by targets whose harness runs a fault proxy
// between the consumer and the producer's advertised control address
// (Profile.FaultProxy; CONTRACT section 4 "An advertised control address").
type FaultInjector interface {
	// SetTransferFaults makes the next calls of method (e.g.
	// "/openengine.v1.Control/TransferEncoderCache") get faults in order,
	// then none. delay applies to FaultDelay.
	SetTransferFaults(method string, delay time.Duration, faults ...TransferFault) error
	// TransferCalls waits until n calls of method were seen (or ctx ends)
	// and returns them.
	TransferCalls(ctx context.Context, method string, n int) ([]TransferCall, error)
	// TransferArrived waits until n calls of method reached the proxy (the
	// consumer has sent its transfer request), done or not.
	TransferArrived(ctx context.Context, method string, n int) error
}

// Restarter is implemented by targets that can replace a role's instance
// with a fresh one (new instance id). Quarantine is sticky until restart
// (CONTRACT Q-4), so Faults-level cases restart the consumer they poisoned.
type Restarter interface {
	Restart(ctx context.Context, role Role) error
}

// Crasher is implemented by targets that start the instances' processes
// themselves and so can crash one: kill it with SIGKILL (no drain, no
// cleanup; its connections close as the kernel reaps it) and start a fresh
// instance in its place. CONTRACT Q-6 is about a killed peer ("a killed
// producer's consumer returns to READY and its next handoff succeeds"); a
// case that needs a crash falls back to Restarter (a drain first) on a
// target without it, and says so.
type Crasher interface {
	// Crash kills role's instance with SIGKILL, waits until it is gone,
	// starts a fresh one (a new instance id) and waits until it is ready.
	// Errors wrap ErrCannotCrash when the target holds no process of the
	// role's running instance (it adopted one another process started):
	// the caller may Restart it instead.
	Crash(ctx context.Context, role Role) error
}

// ErrCannotCrash is wrapped by a Crasher's error when it cannot kill the
// role's instance (not its child: adopted, or left running elsewhere by
// its launcher) and so changed nothing.
var ErrCannotCrash = errors.New("target: cannot crash this instance")

// ConnectionRefuser is implemented by targets whose harness can make the
// producer control endpoint that the consumer trusts refuse connections
// for a while (the fault proxy unbinds its port): a producer that has gone
// away, for the consumer's definite outcome of CONTRACT Q-2 and SE-4.
type ConnectionRefuser interface {
	// RefuseProducerConnections makes every new connection to the
	// producer's advertised control endpoint fail with ECONNREFUSED and
	// closes those open, until restore runs (restore binds it again).
	RefuseProducerConnections(ctx context.Context) (restore func() error, err error)
}

// Transferer is implemented by Engines that let the harness call
// TransferEncoderCache itself, as any client of a producer may (CONTRACT
// SE-3: a producer asked to write to an untrusted consumer agent; SE-4).
type Transferer interface {
	// TransferEncoderCache makes one call and returns the answer, its
	// trailer and its gRPC status as error.
	TransferEncoderCache(ctx context.Context, req *pb.TransferEncoderCacheRequest) (*pb.TransferEncoderCacheResponse, metadata.MD, error)
}

// StandardHealth is implemented by Engines whose standard grpc.health.v1
// service the harness can ask (CONTRACT SE-5).
type StandardHealth interface {
	// ServingStatus is grpc.health.v1 Check for the overall service ("").
	ServingStatus(ctx context.Context) (healthpb.HealthCheckResponse_ServingStatus, error)
}

// TargetWrapper is implemented by a Target that wraps another (the check
// runner's), so Capability finds what the wrapped one offers.
type TargetWrapper interface{ UnwrapTarget() Target }

// EngineWrapper is implemented by an Engine that wraps another (the check
// runner's recording engine), so Capability finds what the wrapped one
// offers.
type EngineWrapper interface{ UnwrapEngine() Engine }

// Capability returns v (a Target or an Engine), or the first one it wraps
// (TargetWrapper, EngineWrapper), that implements the optional capability
// T (ConnectionRefuser, Transferer, StandardHealth, ...).
func Capability[T any](v any) (T, bool) {
	for v != nil {
		if c, ok := v.(T); ok {
			return c, true
		}
		switch w := v.(type) {
		case TargetWrapper:
			v = w.UnwrapTarget()
		case EngineWrapper:
			v = w.UnwrapEngine()
		default:
			v = nil
		}
	}
	var zero T
	return zero, false
}

// MethodTransferEncoderCache is the full gRPC method name of the transfer call.
const MethodTransferEncoderCache = "/openengine.v1.Control/TransferEncoderCache"

// CodeName spells a gRPC code as the contract and TransferCall.UpstreamCode
// do: grpc-go's "InvalidArgument" is "INVALID_ARGUMENT".
func CodeName(c codes.Code) string {
	s := c.String()
	out := make([]byte, 0, len(s)+4)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'A' && ch <= 'Z' && i > 0 && s[i-1] >= 'a' && s[i-1] <= 'z' {
			out = append(out, '_')
		}
		if ch >= 'a' && ch <= 'z' {
			ch -= 'a' - 'A'
		}
		out = append(out, ch)
	}
	return string(out)
}

// ModelComparer is implemented by a target whose harness asked its
// endpoints who they are before the run (GetServerInfo engine name and
// ServerInfo.extra["baton.preset"], GetModelInfo model_id): the check
// runner's. When two implementations meet in one topology (the
// cross-implementation matrix: a producer of one engine, a consumer of
// another), each runs a model of its own and the baseline is the consumer
// implementation's aggregated engine; answers then differ by design, so
// the cases that compare answers with the baseline (B-1, B-2, H-4, H-5)
// are not applicable to the pair (issue 13; CONTRACT section 4 "the
// model identity ... lets the harness check").
type ModelComparer interface {
	// ModelsDiffer returns "" when the producer and the consumer (or P)
	// run one model and preset, else a one-line reason naming both.
	ModelsDiffer() string
}
