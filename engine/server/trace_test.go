package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

func TestParseTraceparent(t *testing.T) {
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"valid", good, true},
		{"valid unsampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"future version with more fields", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", true},
		{"future version, exact length", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"empty", "", false},
		{"short", good[:54], false},
		{"version 00 with trailing data", good + "-x", false},
		{"future version without separator", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false},
		{"version ff", "ff" + good[2:], false},
		{"upper-case hex", strings.ToUpper(good), false},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"bad separators", "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", false},
		{"non-hex trace id", "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01", false},
		{"non-hex flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, err := ParseTraceparent(tt.in)
			if tt.ok != (err == nil) {
				t.Fatalf("ParseTraceparent(%q) = %+v, %v; want ok=%v", tt.in, tc, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadTraceparent) {
				t.Errorf("error %v does not wrap ErrBadTraceparent", err)
			}
		})
	}
	tc, _ := ParseTraceparent(good)
	if tc.TraceIDString() != "4bf92f3577b34da6a3ce929d0e0e4736" || tc.SpanIDString() != "00f067aa0ba902b7" || tc.Flags != 1 || tc.Traceparent() != good {
		t.Errorf("round trip of %q = %+v (%s)", good, tc, tc.Traceparent())
	}
}

func TestOutgoingTraceContext(t *testing.T) {
	ctx := context.Background()
	if OutgoingTraceContext(ctx) != ctx {
		t.Errorf("OutgoingTraceContext without a trace changed the context")
	}
	in, _ := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	in.State = "vendor=x"
	span := childSpan(in, true)
	stale := metadata.AppendToOutgoingContext(ctx, TraceparentKey, "00-11111111111111111111111111111111-2222222222222222-00", "other", "kept")
	out := OutgoingTraceContext(ContextWithTrace(stale, span))
	md, _ := metadata.FromOutgoingContext(out)
	if got := md.Get(TraceparentKey); len(got) != 1 || got[0] != span.Traceparent() {
		t.Errorf("outgoing traceparent = %v; want exactly [%s]", got, span.Traceparent())
	}
	if got := md.Get(TracestateKey); len(got) != 1 || got[0] != "vendor=x" {
		t.Errorf("outgoing tracestate = %v; want [vendor=x]", got)
	}
	if got := md.Get("other"); len(got) != 1 {
		t.Errorf("other outgoing metadata lost: %v", md)
	}
	if span.TraceID != in.TraceID || span.ParentID != in.SpanID || span.SpanID == in.SpanID || span.Flags != 1 {
		t.Errorf("childSpan(%+v) = %+v; want same trace, parent = sender's span, a new span id", in, span)
	}
}

// traceRecorder is a Control server that records the trace context its
// handler saw and, when next is set, calls next.GetLoad on the request's behalf.
type traceRecorder struct {
	pb.UnimplementedControlServer
	mu   sync.Mutex
	seen []TraceContext
	md   []metadata.MD
	next pb.ControlClient
	// forward selects how the trace is forwarded: by OutgoingTraceContext
	// by hand, or by the client interceptor on next's connection.
	byHand bool
}

func (r *traceRecorder) GetLoad(ctx context.Context, req *pb.GetLoadRequest) (*pb.LoadInfo, error) {
	tc, _ := TraceFromContext(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	r.seen = append(r.seen, tc)
	r.md = append(r.md, md)
	r.mu.Unlock()
	if r.next != nil {
		out := ctx
		if r.byHand {
			out = OutgoingTraceContext(ctx)
		}
		return r.next.GetLoad(out, req)
	}
	return &pb.LoadInfo{}, nil
}

// serveRecorder serves rec on loopback with an engine's interceptors.
func serveRecorder(t *testing.T, rec *traceRecorder) string {
	t.Helper()
	e, err := New(Config{Role: RoleAggregated, Preset: "tiny"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(e.serverOptions()...)
	pb.RegisterControlServer(gs, rec)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func dialControl(t *testing.T, addr string, opts ...grpc.DialOption) pb.ControlClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewControlClient(conn)
}

// TestTraceparentRoundTrip: client -> A -> B through two gRPC servers with
// the engine's interceptors. B sees the client's trace id, A's span as its
// parent, the flags and the tracestate; without a traceparent A starts a
// trace that B joins.
func TestTraceparentRoundTrip(t *testing.T) {
	for _, byHand := range []bool{true, false} {
		name := "client interceptor"
		if byHand {
			name = "OutgoingTraceContext"
		}
		t.Run(name, func(t *testing.T) {
			b := &traceRecorder{}
			bAddr := serveRecorder(t, b)
			var opts []grpc.DialOption
			if !byHand {
				opts = append(opts, grpc.WithChainUnaryInterceptor(TraceUnaryClientInterceptor), grpc.WithChainStreamInterceptor(TraceStreamClientInterceptor))
			}
			a := &traceRecorder{next: dialControl(t, bAddr, opts...), byHand: byHand}
			client := dialControl(t, serveRecorder(t, a))

			const header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			ctx := metadata.AppendToOutgoingContext(context.Background(), TraceparentKey, header, TracestateKey, "congo=t61rcWkgMzE")
			if _, err := client.GetLoad(ctx, &pb.GetLoadRequest{}); err != nil {
				t.Fatal(err)
			}
			if _, err := client.GetLoad(context.Background(), &pb.GetLoadRequest{}); err != nil {
				t.Fatal(err)
			}
			if len(a.seen) != 2 || len(b.seen) != 2 {
				t.Fatalf("A saw %d calls, B %d; want 2 each", len(a.seen), len(b.seen))
			}
			sent, _ := ParseTraceparent(header)
			aSpan, bSpan := a.seen[0], b.seen[0]
			if aSpan.TraceID != sent.TraceID || aSpan.ParentID != sent.SpanID || aSpan.SpanID == sent.SpanID {
				t.Errorf("A's span %+v; want the client's trace with the client's span as parent", aSpan)
			}
			if bSpan.TraceID != sent.TraceID || bSpan.ParentID != aSpan.SpanID || bSpan.Flags != 1 || bSpan.State != "congo=t61rcWkgMzE" {
				t.Errorf("B's span %+v; want trace %x, parent A's span %x, flags 01, tracestate forwarded", bSpan, sent.TraceID, aSpan.SpanID)
			}
			if got := b.md[0].Get(TraceparentKey); len(got) != 1 || got[0] != aSpan.Traceparent() {
				t.Errorf("B received traceparent %v; want [%s]", got, aSpan.Traceparent())
			}
			fresh, joined := a.seen[1], b.seen[1]
			if !fresh.Valid() || fresh.TraceID == sent.TraceID || fresh.ParentID != [8]byte{} || fresh.Flags != 0 {
				t.Errorf("A without traceparent: %+v; want a new unsampled trace with no parent", fresh)
			}
			if joined.TraceID != fresh.TraceID || joined.ParentID != fresh.SpanID {
				t.Errorf("B joined %+v; want A's new trace %x with parent %x", joined, fresh.TraceID, fresh.SpanID)
			}
		})
	}
}

// TestParseTracestate is the malformed-input test of the tracestate
// header (W3C trace-context level 1 section 3.3): what the engine forwards
// on a request's behalf is at most MaxTracestateBytes of at most 32
// well-formed list members with distinct keys; anything else is dropped.
func TestParseTracestate(t *testing.T) {
	member := func(i int) string { return fmt.Sprintf("k%d=v%d", i, i) }
	members := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, member(i))
		}
		return out
	}
	for _, c := range []struct {
		name string
		in   []string // header values as received (several are joined with ",")
		want string   // "" = dropped
	}{
		{"one member", []string{"congo=t61rcWkgMzE"}, "congo=t61rcWkgMzE"},
		{"two members with whitespace", []string{"rojo=00f067aa0ba902b7 ,\tcongo=t61rcWkgMzE"}, "rojo=00f067aa0ba902b7 ,\tcongo=t61rcWkgMzE"},
		{"two headers", []string{"rojo=1", "congo=2"}, "rojo=1,congo=2"},
		{"multi-tenant key", []string{"fw529a3039@dt=ZmY0OThkYTc"}, "fw529a3039@dt=ZmY0OThkYTc"},
		{"key chars", []string{"a0_-*/b=x"}, "a0_-*/b=x"},
		{"value with a space inside", []string{"k=a b"}, "k=a b"},
		{"empty members", []string{"k=v,,  ,j=w"}, "k=v,,  ,j=w"},
		{"32 members", []string{strings.Join(members(32), ",")}, strings.Join(members(32), ",")},
		{"exactly 512 bytes", []string{"k=" + strings.Repeat("v", 255) + ",j=" + strings.Repeat("w", 252)}, "k=" + strings.Repeat("v", 255) + ",j=" + strings.Repeat("w", 252)},

		{"absent", nil, ""},
		{"empty", []string{""}, ""},
		{"513 bytes", []string{"k=" + strings.Repeat("v", 255) + ",j=" + strings.Repeat("w", 253)}, ""},
		{"16 MiB (attack A2)", []string{"k=" + strings.Repeat("v", 16<<20)}, ""},
		{"33 members", []string{strings.Join(members(33), ",")}, ""},
		{"33 members over two headers", []string{strings.Join(members(17), ","), strings.Join(members(33)[17:], ",")}, ""},
		{"duplicate key", []string{"k=1,k=2"}, ""},
		{"no equals sign", []string{"congo"}, ""},
		{"upper-case key", []string{"Congo=1"}, ""},
		{"key starting with a digit is a tenant only", []string{"0k=1"}, ""},
		{"empty value", []string{"k="}, ""},
		{"value ending in a space", []string{"k=v "}, "k=v "},
		{"value with a comma", []string{"k=a\x2cb=c=d"}, ""},
		{"value with an equals sign", []string{"k=a=b"}, ""},
		{"value of 257 bytes", []string{"k=" + strings.Repeat("v", 257)}, ""},
		{"value with a control byte", []string{"k=a\x01b"}, ""},
		{"value with non-ASCII", []string{"k=\xc3\xa9"}, ""},
		{"key of 257 bytes", []string{strings.Repeat("k", 257) + "=v"}, ""},
		{"system id of 15 bytes", []string{"t@" + strings.Repeat("s", 15) + "=v"}, ""},
		{"tenant id of 242 bytes", []string{strings.Repeat("t", 242) + "@s=v"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := parseTracestate(c.in)
			if got != c.want {
				t.Errorf("parseTracestate(%.80q) = %.80q; want %.80q", c.in, got, c.want)
			}
		})
	}
}

// TestIncomingTraceDropsMalformedState: an incoming tracestate is kept
// (and forwarded on the request's behalf) only when it is well-formed and
// at most MaxTracestateBytes; a traceparent a call makes is always this
// engine's own 55-character version-00 header, whatever version came in.
func TestIncomingTraceDropsMalformedState(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		name, parent, state, want string
	}{
		{"well-formed", parent, "congo=t61rcWkgMzE", "congo=t61rcWkgMzE"},
		{"oversize", parent, "k=" + strings.Repeat("v", 1<<20), ""},
		{"malformed", parent, "not a tracestate", ""},
		{"future version traceparent", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + strings.Repeat("x", 4096), "congo=1", "congo=1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := metadata.NewIncomingContext(context.Background(), metadata.Pairs(TraceparentKey, c.parent, TracestateKey, c.state))
			tc := incomingTrace(in)
			if tc.State != c.want {
				t.Errorf("State = %.60q; want %.60q", tc.State, c.want)
			}
			md, _ := metadata.FromOutgoingContext(OutgoingTraceContext(ContextWithTrace(context.Background(), tc)))
			tp := md.Get(TraceparentKey)
			if len(tp) != 1 || len(tp[0]) != 55 || !strings.HasPrefix(tp[0], "00-") {
				t.Errorf("outgoing traceparent %v; want one 55-character version-00 header", tp)
			}
			if ts := md.Get(TracestateKey); (c.want == "") != (len(ts) == 0) || (len(ts) > 0 && ts[0] != c.want) {
				t.Errorf("outgoing tracestate %.60q; want %.60q", ts, c.want)
			}
		})
	}
}

// TestDroppedTracestateLoggedAtDebug: a tracestate the engine drops is
// logged at debug level (with its size, never its bytes); a well-formed
// one is not.
func TestDroppedTracestateLoggedAtDebug(t *testing.T) {
	_, eng, logs := startLoggedEngine(t, Config{Role: RoleAggregated})
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	text := &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "hi"}}
	dropped := func() int {
		n := 0
		for _, rec := range logs.records(t) {
			if strings.HasPrefix(fmt.Sprint(rec["msg"]), "tracestate dropped") {
				n++
				if rec["level"] != "DEBUG" || rec["bytes"] == nil {
					t.Errorf("log line %v; want level DEBUG with bytes", rec)
				}
			}
		}
		return n
	}
	for _, c := range []struct {
		state string
		want  int
	}{{"congo=1", 0}, {"k=" + strings.Repeat("v", 600), 1}, {"Not=Valid", 2}} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), TraceparentKey, parent, TracestateKey, c.state)
		if res, err := eng.Generate(ctx, text); err != nil || res.Code() != 0 {
			t.Fatalf("Generate = %v %v", res.Status, err)
		}
		if got := dropped(); got != c.want {
			t.Errorf("after a tracestate of %d bytes: %d debug lines about a dropped tracestate; want %d", len(c.state), got, c.want)
		}
	}
	if strings.Contains(fmt.Sprint(logs.records(t)), strings.Repeat("v", 600)) {
		t.Errorf("the log carries the dropped tracestate itself")
	}
}
