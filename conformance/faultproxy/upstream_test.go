package faultproxy

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The test upstream serves a handwritten Echo service over a raw codec
// registered as content-subtype "baton-raw" (so the proxy must keep the
// caller's subtype), next to grpc.health.v1 over proto.
const (
	echoService        = "baton.faultproxy.test.Echo"
	methodUnary        = "/" + echoService + "/Unary"
	methodServerStream = "/" + echoService + "/ServerStream"
	methodBlock        = "/" + echoService + "/Block"
	rawSubtype         = "baton-raw"
)

type testRawCodec struct{ rawCodec }

func (testRawCodec) Name() string { return rawSubtype }

func init() { encoding.RegisterCodecV2(testRawCodec{}) }

// echoServer counts the requests that took effect.
type echoServer struct {
	handled      atomic.Int64
	blockStarted chan struct{} // one send per Block call, on entry
	blockEnded   chan error    // the Block call's context error
}

// unary echoes "echo:<payload>" with header x-upstream-header and the
// caller's x-case, and trailer x-upstream-trailer. Payload "reject" answers
// trailers-only INVALID_ARGUMENT with a StringValue detail and the trailer
// baton-transfer-rejected: before-write (CONTRACT Q-2).
func (s *echoServer) unary(ctx context.Context, req *frame) (*frame, error) {
	s.handled.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	if string(req.payload) == "reject" {
		grpc.SetTrailer(ctx, metadata.Pairs("baton-transfer-rejected", "before-write"))
		st, err := status.New(codes.InvalidArgument, "reference spent").WithDetails(wrapperspb.String("spent"))
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	hdr := metadata.Pairs("x-upstream-header", "h1")
	for _, v := range md.Get("x-case") {
		hdr.Append("x-echo-case", v)
	}
	for _, v := range md.Get("x-blob-bin") {
		hdr.Append("x-echo-blob-bin", v)
	}
	grpc.SetHeader(ctx, hdr)
	grpc.SetTrailer(ctx, metadata.Pairs("x-upstream-trailer", "t1"))
	return &frame{payload: append([]byte("echo:"), req.payload...)}, nil
}

// serverStream reads one request holding a count n and sends n frames
// "item-0".."item-{n-1}", with a header and a trailer.
func (s *echoServer) serverStream(stream grpc.ServerStream) error {
	req := new(frame)
	if err := stream.RecvMsg(req); err != nil {
		return err
	}
	s.handled.Add(1)
	n, err := strconv.Atoi(string(req.payload))
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "count %q: %v", req.payload, err)
	}
	if err := stream.SendHeader(metadata.Pairs("x-upstream-header", "sh")); err != nil {
		return err
	}
	for i := range n {
		if err := stream.SendMsg(&frame{payload: []byte("item-" + strconv.Itoa(i))}); err != nil {
			return err
		}
	}
	stream.SetTrailer(metadata.Pairs("x-upstream-trailer", "st"))
	return nil
}

// block waits for its context to end and reports why.
func (s *echoServer) block(ctx context.Context, _ *frame) (*frame, error) {
	s.handled.Add(1)
	s.blockStarted <- struct{}{}
	<-ctx.Done()
	s.blockEnded <- ctx.Err()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func unaryHandler(f func(*echoServer, context.Context, *frame) (*frame, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		req := new(frame)
		if err := dec(req); err != nil {
			return nil, err
		}
		return f(srv.(*echoServer), ctx, req)
	}
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: echoService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Unary", Handler: unaryHandler((*echoServer).unary)},
		{MethodName: "Block", Handler: unaryHandler((*echoServer).block)},
	},
	Streams: []grpc.StreamDesc{{
		StreamName:    "ServerStream",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			return srv.(*echoServer).serverStream(stream)
		},
	}},
}

// startUpstream runs an Echo + health server on an ephemeral port until the
// test ends.
func startUpstream(t *testing.T) (*echoServer, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	es := &echoServer{blockStarted: make(chan struct{}, 4), blockEnded: make(chan error, 4)}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(DefaultMaxMessageBytes), grpc.MaxSendMsgSize(DefaultMaxMessageBytes))
	srv.RegisterService(&echoDesc, es)
	hs := health.NewServer()
	hs.SetServingStatus("encoder_cache", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(l) //nolint:errcheck
	t.Cleanup(srv.Stop)
	return es, l.Addr().String()
}

func startProxy(t *testing.T, upstream string, opts Options) *Proxy {
	t.Helper()
	p, err := New(upstream, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// callUnary sends payload to method over the raw subtype and returns the
// reply payload.
func callUnary(ctx context.Context, cc *grpc.ClientConn, method, payload string, opts ...grpc.CallOption) (string, error) {
	reply := new(frame)
	opts = append(opts, grpc.CallContentSubtype(rawSubtype), grpc.MaxCallRecvMsgSize(DefaultMaxMessageBytes), grpc.MaxCallSendMsgSize(DefaultMaxMessageBytes))
	err := cc.Invoke(ctx, method, &frame{payload: []byte(payload)}, reply, opts...)
	return string(reply.payload), err
}

// waitRecorded blocks until the proxy has begun n calls of method under the
// current plan.
func waitRecorded(t *testing.T, p *Proxy, method string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for {
		p.mu.Lock()
		k := len(p.epoch.records[method])
		ch := p.changed
		p.mu.Unlock()
		if k >= n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("proxy began %d calls of %s, want %d", k, method, n)
		}
	}
}

// waitDone returns the records once n calls of method are done.
func waitDone(t *testing.T, p *Proxy, method string, n int) []CallRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	recs, err := p.WaitCalls(ctx, method, n)
	if err != nil {
		t.Fatalf("WaitCalls(%s, %d): %v; records %+v", method, n, err, recs)
	}
	return recs
}

func joined(md metadata.MD, key string) string { return strings.Join(md.Get(key), ",") }
