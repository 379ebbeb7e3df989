package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// MaxMessageBytes is the largest message the harness sends or accepts (64 MiB),
// so L-1/L-6 cases can send oversize inputs and see the engine's own answer.
const MaxMessageBytes = 64 << 20

// GRPCEngine is an Engine reached over gRPC (wire profile baton.encoder.v1).
type GRPCEngine struct {
	conn      *grpc.ClientConn
	inference pb.InferenceClient
	control   pb.ControlClient
	address   string
}

// DialOption configures DialEngine.
type DialOption func(*dialConfig)

type dialConfig struct {
	creds credentials.TransportCredentials
	token string // bearer token on every call unless the context says otherwise (WithCaller)
	err   error
	extra []grpc.DialOption
}

// WithBearerToken makes every call carry token as gRPC metadata
// `authorization: Bearer <token>` (the operator's credential, CONTRACT
// SE-2), unless its context names another caller (WithCaller).
func WithBearerToken(token string) DialOption {
	return func(c *dialConfig) { c.token = token }
}

type callerKey struct{}

// WithCaller makes the calls made with ctx carry token as their bearer
// token instead of the connection's (WithBearerToken); "" sends none, an
// anonymous caller. SE-2's cases call as non-operators with it.
func WithCaller(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, callerKey{}, token)
}

// withToken adds the call's bearer token to ctx's outgoing metadata.
func (c *dialConfig) withToken(ctx context.Context) context.Context {
	tok := c.token
	if v, ok := ctx.Value(callerKey{}).(string); ok {
		tok = v
	}
	if tok == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// WithTLS makes DialEngine use TLS with the given settings (the profile's
// `tls:` block); nil keeps plaintext. DialEngine returns the settings' error
// (ErrBadTLS) if its files cannot be loaded.
func WithTLS(t *TLS) DialOption {
	return func(c *dialConfig) {
		if t == nil {
			return
		}
		c.creds, c.err = t.credentials()
	}
}

// withFastReconnect reconnects within at most reconnectMaxDelay after the
// endpoint went away (grpc-go's default backoff grows to 120 s), so an
// instance a launch section restarted at the same address is reached at once.
func withFastReconnect() DialOption {
	return func(c *dialConfig) {
		c.extra = append(c.extra, grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMaxDelay},
			MinConnectTimeout: 2 * time.Second,
		}))
	}
}

// reconnectMaxDelay bounds the reconnect backoff of withFastReconnect.
const reconnectMaxDelay = 500 * time.Millisecond

// withCredentials uses already-built transport credentials.
func withCredentials(creds credentials.TransportCredentials) DialOption {
	return func(c *dialConfig) { c.creds = creds }
}

// DialEngine connects to address (host:port), in plaintext unless WithTLS
// says otherwise. The connection is lazy: an unreachable engine shows up as
// UNAVAILABLE on the first call. Errors: ErrBadTLS; an unparsable address.
func DialEngine(address string, opts ...DialOption) (*GRPCEngine, error) {
	dc := dialConfig{creds: insecure.NewCredentials()}
	for _, o := range opts {
		o(&dc)
	}
	if dc.err != nil {
		return nil, dc.err
	}
	conn, err := grpc.NewClient(address, append([]grpc.DialOption{
		grpc.WithTransportCredentials(dc.creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(dc.withToken(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(dc.withToken(ctx), desc, cc, method, opts...)
		})}, dc.extra...)...)
	if err != nil {
		return nil, fmt.Errorf("target: dial %s: %w", address, err)
	}
	return &GRPCEngine{conn: conn, inference: pb.NewInferenceClient(conn), control: pb.NewControlClient(conn), address: address}, nil
}

// Close closes the connection.
func (e *GRPCEngine) Close() error { return e.conn.Close() }

// Address is the host:port the engine was dialled at (SE-1's cases open
// their own connections there).
func (e *GRPCEngine) Address() string { return e.address }

// Redial opens a new connection to the same address with other settings
// (SE-2: a non-operator's certificate); the caller closes it.
func (e *GRPCEngine) Redial(opts ...DialOption) (*GRPCEngine, error) {
	return DialEngine(e.address, opts...)
}

// Bounds on what Generate keeps of one stream. Every case asks for a few
// tokens (at most 24, one response each, plus EncoderReady or PrefillReady,
// GenerationFinished, an EngineError) and each response is a few KiB at
// most, so these are two orders of magnitude above any correct answer; a
// target streaming without end (attack F7: endless 1 MiB messages grew the
// harness to 6.3 GB in a minute) is cut off at them instead.
const (
	// MaxGenerateResponses is the most responses Generate keeps.
	MaxGenerateResponses = 4096
	// MaxGenerateBytes is the most bytes of responses (their wire size)
	// Generate keeps. One message may be MaxMessageBytes.
	MaxGenerateBytes = 64 << 20
)

// CodeStreamedTooMuch is the status code of a Generate result the harness
// cut off because the target streamed past MaxGenerateResponses or
// MaxGenerateBytes (GenerateResult.Overflow). No case expects it (the
// contract answers with INVALID_ARGUMENT, FAILED_PRECONDITION, UNAVAILABLE,
// RESOURCE_EXHAUSTED, UNIMPLEMENTED or OK), so a case judges it as the
// target's wrong answer, a failure, not the harness's error.
const CodeStreamedTooMuch = codes.OutOfRange

// Generate implements Engine. It keeps at most MaxGenerateResponses
// responses and MaxGenerateBytes bytes: past either it cancels the stream
// and returns what it kept with Overflow set and the status
// CodeStreamedTooMuch saying so.
func (e *GRPCEngine) Generate(ctx context.Context, req *pb.GenerateRequest) (*GenerateResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := e.inference.Generate(ctx, req)
	if err != nil {
		return &GenerateResult{Status: status.Convert(err)}, nil
	}
	res := &GenerateResult{}
	kept := 0 // bytes of res.Responses
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			res.Status = status.New(0, "")
			break
		}
		if err != nil {
			res.Status = status.Convert(err)
			break
		}
		size := proto.Size(resp)
		if len(res.Responses) >= MaxGenerateResponses || kept+size > MaxGenerateBytes {
			cancel() // stop the target's stream: nothing more is read
			res.Overflow = true
			res.Status = status.Newf(CodeStreamedTooMuch, "the target streamed more than the harness keeps of one Generate (%d responses, %d bytes; limits %d responses, %d bytes): the harness cut the stream off there; no request of the suite asks for that much",
				len(res.Responses)+1, kept+size, MaxGenerateResponses, MaxGenerateBytes)
			break
		}
		kept += size
		res.Responses = append(res.Responses, resp)
	}
	res.Trailer = stream.Trailer()
	if res.Trailer == nil {
		res.Trailer = metadata.MD{}
	}
	return res, nil
}

// GetServerInfo implements Engine.
func (e *GRPCEngine) GetServerInfo(ctx context.Context) (*pb.ServerInfo, error) {
	return e.control.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
}

// GetModelInfo implements Engine.
func (e *GRPCEngine) GetModelInfo(ctx context.Context, model string) (*pb.ModelInfo, error) {
	return e.control.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: model})
}

// GetLoad implements Engine.
func (e *GRPCEngine) GetLoad(ctx context.Context) (*pb.LoadInfo, error) {
	return e.control.GetLoad(ctx, &pb.GetLoadRequest{})
}

// Health implements Engine.
func (e *GRPCEngine) Health(ctx context.Context) (*pb.HealthResponse, error) {
	return e.control.Health(ctx, &pb.HealthRequest{})
}

// Abort implements Engine.
func (e *GRPCEngine) Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	return e.control.Abort(ctx, req)
}

// Shutdown implements Engine.
func (e *GRPCEngine) Shutdown(ctx context.Context, req *pb.ShutdownRequest) (*pb.ShutdownResponse, error) {
	return e.control.Shutdown(ctx, req)
}

// TransferEncoderCache implements Transferer: one TransferEncoderCache call
// as any client may make it, with the answer's trailer.
func (e *GRPCEngine) TransferEncoderCache(ctx context.Context, req *pb.TransferEncoderCacheRequest) (*pb.TransferEncoderCacheResponse, metadata.MD, error) {
	var trailer metadata.MD
	resp, err := e.control.TransferEncoderCache(ctx, req, grpc.Trailer(&trailer))
	if trailer == nil {
		trailer = metadata.MD{}
	}
	return resp, trailer, err
}

// ServingStatus implements StandardHealth: grpc.health.v1 Check of the
// overall service ("").
func (e *GRPCEngine) ServingStatus(ctx context.Context) (healthpb.HealthCheckResponse_ServingStatus, error) {
	resp, err := healthpb.NewHealthClient(e.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, err
	}
	return resp.GetStatus(), nil
}
