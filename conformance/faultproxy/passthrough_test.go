package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// testWait bounds every wait for the proxy in these tests.
const testWait = 10 * time.Second

func TestPassthroughUnaryForwardsMetadataHeadersTrailers(t *testing.T) {
	_, up := startUpstream(t)
	p := startProxy(t, up, Options{})
	cc := dial(t, p.Addr())

	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-case", "passthrough", "x-blob-bin", string([]byte{0, 1, 0xff}))
	var hdr, trl metadata.MD
	got, err := callUnary(ctx, cc, methodUnary, "hello", grpc.Header(&hdr), grpc.Trailer(&trl))
	if err != nil {
		t.Fatalf("call through proxy: %v", err)
	}
	if got != "echo:hello" {
		t.Errorf("reply = %q, want %q", got, "echo:hello")
	}
	for _, c := range []struct {
		md        metadata.MD
		key, want string
	}{
		{hdr, "x-upstream-header", "h1"},
		{hdr, "x-echo-case", "passthrough"},
		{hdr, "x-echo-blob-bin", string([]byte{0, 1, 0xff})},
		{trl, "x-upstream-trailer", "t1"},
	} {
		if v := joined(c.md, c.key); v != c.want {
			t.Errorf("%s = %q, want %q", c.key, v, c.want)
		}
	}
	recs := waitDone(t, p, methodUnary, 1)
	r := recs[0]
	if r.Index != 0 || r.Step.Fault != FaultNone || !r.Forwarded || !r.UpstreamReached || !r.UpstreamDone || r.UpstreamCode != codes.OK {
		t.Errorf("record = %+v, want index 0, none, forwarded, reached, upstream OK", r)
	}
	if v := joined(r.UpstreamTrailer, "x-upstream-trailer"); v != "t1" {
		t.Errorf("recorded upstream trailer = %q, want t1", v)
	}
}

// TestPassthroughQ2RejectionTrailerAndDetails: a trailers-only
// INVALID_ARGUMENT with baton-transfer-rejected: before-write and a status
// detail reaches the caller unchanged (CONTRACT Q-2 depends on the trailer).
func TestPassthroughQ2RejectionTrailerAndDetails(t *testing.T) {
	_, up := startUpstream(t)
	p := startProxy(t, up, Options{})
	cc := dial(t, p.Addr())

	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	var hdr, trl metadata.MD
	_, err := callUnary(ctx, cc, methodUnary, "reject", grpc.Header(&hdr), grpc.Trailer(&trl))
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || st.Message() != "reference spent" {
		t.Fatalf("status = %v, want INVALID_ARGUMENT %q", st, "reference spent")
	}
	if v := joined(trl, "baton-transfer-rejected"); v != "before-write" {
		t.Errorf("trailer baton-transfer-rejected = %q, want before-write (Q-2)", v)
	}
	if len(hdr) != 0 {
		t.Errorf("header = %v, want none (upstream answered trailers-only)", hdr)
	}
	details := st.Details()
	if len(details) != 1 || !proto.Equal(details[0].(proto.Message), wrapperspb.String("spent")) {
		t.Errorf("status details = %v, want [StringValue spent]", details)
	}
	r := waitDone(t, p, methodUnary, 1)[0]
	if !r.UpstreamReached || r.UpstreamCode != codes.InvalidArgument || joined(r.UpstreamTrailer, "baton-transfer-rejected") != "before-write" {
		t.Errorf("record = %+v, want reached, upstream INVALID_ARGUMENT with the Q-2 trailer", r)
	}
}

func TestPassthroughServerStream(t *testing.T) {
	_, up := startUpstream(t)
	p := startProxy(t, up, Options{})
	cc := dial(t, p.Addr())

	for _, n := range []int{0, 1, 5} {
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		s, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, methodServerStream, grpc.CallContentSubtype(rawSubtype))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMsg(&frame{payload: []byte{byte('0' + n)}}); err != nil {
			t.Fatal(err)
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		hdr, err := s.Header()
		if err != nil || joined(hdr, "x-upstream-header") != "sh" {
			t.Errorf("n=%d: header %v, %v; want x-upstream-header sh", n, hdr, err)
		}
		var items []string
		for {
			f := new(frame)
			err := s.RecvMsg(f)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("n=%d: recv: %v", n, err)
			}
			items = append(items, string(f.payload))
		}
		if len(items) != n || (n > 0 && items[n-1] != "item-"+string(rune('0'+n-1))) {
			t.Errorf("n=%d: items %q", n, items)
		}
		if v := joined(s.Trailer(), "x-upstream-trailer"); v != "st" {
			t.Errorf("n=%d: trailer = %q, want st", n, v)
		}
		cancel()
	}
	recs := waitDone(t, p, methodServerStream, 3)
	for i, r := range recs {
		if r.Index != i || !r.UpstreamReached || r.UpstreamCode != codes.OK {
			t.Errorf("record %d = %+v", i, r)
		}
	}

	// A malformed count is the upstream's INVALID_ARGUMENT, passed through.
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, methodServerStream, grpc.CallContentSubtype(rawSubtype))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(&frame{payload: []byte("not-a-number")}); err != nil {
		t.Fatal(err)
	}
	s.CloseSend()
	if err := s.RecvMsg(new(frame)); status.Code(err) != codes.InvalidArgument {
		t.Errorf("malformed count: %v, want INVALID_ARGUMENT", err)
	}
}

// TestPassthroughProtoHealth: a generated proto client (content-type
// application/grpc) gets the same answers through the proxy, unary and
// server-streaming.
func TestPassthroughProtoHealth(t *testing.T) {
	_, up := startUpstream(t)
	p := startProxy(t, up, Options{})
	hc := healthpb.NewHealthClient(dial(t, p.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()

	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "encoder_cache"})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Check = %v, %v; want SERVING", resp, err)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check unknown service: %v, want NOT_FOUND", err)
	}
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "encoder_cache"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Watch first = %v, %v; want SERVING", first, err)
	}
	recs := waitDone(t, p, "/grpc.health.v1.Health/Check", 2)
	if recs[1].UpstreamCode != codes.NotFound {
		t.Errorf("record of unknown-service Check = %+v, want upstream NOT_FOUND", recs[1])
	}
}

// TestPassthroughLargeMessage: a 5 MiB request and reply, above gRPC's 4 MiB
// default, pass (Options.MaxMessageBytes default).
func TestPassthroughLargeMessage(t *testing.T) {
	_, up := startUpstream(t)
	p := startProxy(t, up, Options{})
	cc := dial(t, p.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	big := string(bytes.Repeat([]byte{0xab}, 5<<20))
	got, err := callUnary(ctx, cc, methodUnary, big)
	if err != nil || got != "echo:"+big {
		t.Fatalf("5 MiB echo: len %d, %v", len(got), err)
	}

	small := startProxy(t, up, Options{MaxMessageBytes: 1 << 10})
	_, err = callUnary(ctx, dial(t, small.Addr()), methodUnary, string(bytes.Repeat([]byte{1}, 2<<10)))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("2 KiB through a 1 KiB proxy: %v, want RESOURCE_EXHAUSTED", err)
	}
}

// TestPassthroughCancelReachesUpstream: with no fault, a caller's cancel
// cancels the upstream call.
func TestPassthroughCancelReachesUpstream(t *testing.T) {
	es, up := startUpstream(t)
	p := startProxy(t, up, Options{})
	cc := dial(t, p.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := callUnary(ctx, cc, methodBlock, "x")
		errc <- err
	}()
	<-es.blockStarted
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Errorf("caller: %v, want CANCELED", err)
	}
	select {
	case err := <-es.blockEnded:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("upstream context ended with %v, want canceled", err)
		}
	case <-time.After(testWait):
		t.Fatal("upstream never saw the cancel")
	}
	waitDone(t, p, methodBlock, 1)
}

func TestNoUpstreamThenSetUpstream(t *testing.T) {
	_, up := startUpstream(t)
	p := startProxy(t, "", Options{})
	cc := dial(t, p.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if _, err := callUnary(ctx, cc, methodUnary, "a"); status.Code(err) != codes.Unavailable {
		t.Errorf("no upstream: %v, want UNAVAILABLE", err)
	}
	if r := waitDone(t, p, methodUnary, 1)[0]; r.Forwarded || r.UpstreamReached || r.UpstreamCode != codes.Unavailable {
		t.Errorf("record = %+v, want not forwarded, upstream UNAVAILABLE", r)
	}
	if err := p.SetUpstream(up); err != nil {
		t.Fatal(err)
	}
	if got, err := callUnary(ctx, cc, methodUnary, "b"); err != nil || got != "echo:b" {
		t.Errorf("after SetUpstream: %q, %v", got, err)
	}
}

// TestUpstreamDown: an upstream that refuses connections gives the caller
// UNAVAILABLE and a record that says the upstream was not reached.
func TestUpstreamDown(t *testing.T) {
	_, up := startUpstream(t)
	p := startProxy(t, up, Options{})
	if err := p.SetUpstream("127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if _, err := callUnary(ctx, dial(t, p.Addr()), methodUnary, "a"); status.Code(err) != codes.Unavailable {
		t.Errorf("upstream down: %v, want UNAVAILABLE", err)
	}
	if r := waitDone(t, p, methodUnary, 1)[0]; r.UpstreamReached || r.UpstreamCode != codes.Unavailable {
		t.Errorf("record = %+v, want not reached, UNAVAILABLE", r)
	}
}
