package server

import (
	"context"
	"strings"
	"testing"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// TestMalformedControlInputs covers the malformed-input paths of Abort and
// Shutdown: each gets a clear code and leaves the engine READY.
func TestMalformedControlInputs(t *testing.T) {
	dir := t.TempDir()
	_, producer := startEngine(t, Config{Role: RoleEncoder, CacheDir: dir})
	_, consumer := startEngine(t, Config{Role: RolePD, CacheDir: dir})
	ctx := context.Background()
	good := &pb.EncoderCacheRef{Backend: BackendSharedDir, ProducerInstanceId: "0f0e0d0c-0b0a-4908-8706-050403020100", OpaqueState: []byte(`{"v":1}`)}
	cases := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"Abort without target", func() error { _, err := producer.Abort(ctx, &pb.AbortRequest{}); return err }, codes.InvalidArgument},
		{"Abort with empty request_id", func() error {
			_, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: ""}})
			return err
		}, codes.InvalidArgument},
		{"SU-4 Abort with a malformed reference", func() error {
			_, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: good}})
			return err
		}, codes.InvalidArgument},
		{"SU-4 Abort with a nil reference", func() error {
			_, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{}})
			return err
		}, codes.InvalidArgument},
		{"L-1 Abort with an oversize reference", func() error {
			big := &pb.EncoderCacheRef{Backend: BackendSharedDir, ProducerInstanceId: good.ProducerInstanceId, OpaqueState: []byte(strings.Repeat(" ", 70000))}
			_, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: big}})
			return err
		}, codes.InvalidArgument},
		{"L-4 Abort(encoder_cache) on a consumer", func() error {
			_, err := consumer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: good}})
			return err
		}, codes.FailedPrecondition},
		{"L-4 Abort(kv_session) on the encoder", func() error {
			_, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_KvSession{KvSession: &pb.KvSessionRef{SessionId: "x"}}})
			return err
		}, codes.FailedPrecondition},
		{"S-1 Shutdown with an empty id", func() error { _, err := producer.Shutdown(ctx, &pb.ShutdownRequest{}); return err }, codes.InvalidArgument},
		{"S-1 Shutdown with a binary id", func() error {
			_, err := producer.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: "../../etc/passwd\x00"})
			return err
		}, codes.FailedPrecondition},
		{"SU-4 consume with an empty reference", func() error {
			res, err := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "hi"},
				Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: &pb.EncoderCacheRef{}}}})
			if err != nil {
				return err
			}
			return res.Status.Err()
		}, codes.InvalidArgument},
		{"model not served", func() error {
			res, err := consumer.Generate(ctx, &pb.GenerateRequest{Model: "other", Input: &pb.GenerateRequest_Prompt{Prompt: "hi"}})
			if err != nil {
				return err
			}
			return res.Status.Err()
		}, codes.NotFound},
		{"token id out of vocabulary", func() error {
			res, err := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_TokenIds{TokenIds: &pb.TokenIds{Ids: []uint32{1 << 30}}}})
			if err != nil {
				return err
			}
			return res.Status.Err()
		}, codes.InvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := status.Code(c.call()); got != c.want {
				t.Errorf("code %v, want %v", got, c.want)
			}
		})
	}
	for _, e := range []interface {
		Health(context.Context) (*pb.HealthResponse, error)
	}{producer, consumer} {
		h, err := e.Health(ctx)
		if err != nil || h.GetState() != pb.HealthState_HEALTH_STATE_READY {
			t.Errorf("after malformed inputs Health = %v, %v; want READY", h.GetState(), err)
		}
	}
}

// TestUndecodableRequestIsInvalidArgument: bytes that do not decode as the
// request message (invalid UTF-8 in a string field) get INVALID_ARGUMENT,
// never INTERNAL (CONTRACT SU-4), on a unary and on the streaming RPC.
func TestUndecodableRequestIsInvalidArgument(t *testing.T) {
	dir := t.TempDir()
	srv, _ := startEngine(t, Config{Role: RolePD, CacheDir: dir})
	conn, err := grpc.NewClient(srv.lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Field 1 (string) with bytes 0xff 0xfe: not UTF-8.
	bad := rawBytes{0x0a, 0x02, 0xff, 0xfe}
	ctx := context.Background()
	var out rawBytes
	err = conn.Invoke(ctx, pb.Control_Shutdown_FullMethodName, &bad, &out, grpc.ForceCodecV2(rawCodec{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("unary: %v, want INVALID_ARGUMENT", err)
	}
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, pb.Inference_Generate_FullMethodName, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&bad); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	if err := stream.RecvMsg(&out); status.Code(err) != codes.InvalidArgument {
		t.Errorf("stream: %v, want INVALID_ARGUMENT", err)
	}
}

type rawBytes []byte

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawBytes))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawBytes) = data.Materialize()
	return nil
}
