package target

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// floodServer is an Inference server whose Generate streams tokens of
// text bytes each, without end (finite > 0: that many, then
// GenerationFinished), until the client goes away; ended is closed when a
// stream it served ended.
type floodServer struct {
	pb.UnimplementedInferenceServer
	text   string
	finite int
	ended  chan struct{}
}

func (f *floodServer) Generate(_ *pb.GenerateRequest, stream grpc.ServerStreamingServer[pb.GenerateResponse]) error {
	defer close(f.ended)
	for i := 0; f.finite == 0 || i < f.finite; i++ {
		resp := &pb.GenerateResponse{Event: &pb.GenerateResponse_Token{Token: &pb.TokenOutput{Tokens: []*pb.TokenInfo{{TokenId: uint32(i)}}, Text: f.text}}}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	return stream.Send(&pb.GenerateResponse{Event: &pb.GenerateResponse_Finished{Finished: &pb.GenerationFinished{}}})
}

// startFlood serves f on loopback and dials it as the harness does.
func startFlood(t *testing.T, f *floodServer) *GRPCEngine {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	pb.RegisterInferenceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	e, err := DialEngine(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// TestGenerateBoundsWhatItKeeps: a target that streams without end (attack
// F7: endless 1 MiB messages grew `baton check` to 6.3 GB in a minute) is
// cut off at MaxGenerateBytes or MaxGenerateResponses: Generate cancels the
// stream (the target sees it end) and returns what it kept, Overflow set,
// with a status (CodeStreamedTooMuch) that says the target streamed too
// much; an answer of a real case's size is kept whole.
func TestGenerateBoundsWhatItKeeps(t *testing.T) {
	for _, c := range []struct {
		name        string
		text        string
		finite      int
		overflow    bool
		maxResponse int
	}{
		{"endless 1 MiB messages", strings.Repeat("x", 1<<20), 0, true, MaxGenerateBytes / (1 << 20)},
		{"endless small messages", "t", 0, true, MaxGenerateResponses},
		{"a real answer (24 tokens)", "tok", 24, false, 25},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &floodServer{text: c.text, finite: c.finite, ended: make(chan struct{})}
			e := startFlood(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on a hang, not a wait
			defer cancel()
			res, err := e.Generate(ctx, &pb.GenerateRequest{RequestId: "flood"})
			if err != nil {
				t.Fatal(err)
			}
			kept := 0
			for _, r := range res.Responses {
				kept += proto.Size(r)
			}
			if len(res.Responses) > c.maxResponse || kept > MaxGenerateBytes {
				t.Errorf("Generate kept %d responses, %d bytes; want at most %d responses, %d bytes", len(res.Responses), kept, c.maxResponse, MaxGenerateBytes)
			}
			if !c.overflow {
				if res.Overflow || res.Code() != codes.OK || len(res.Responses) != c.finite+1 {
					t.Errorf("Generate = overflow %v, %v, %d responses; want no overflow, OK, %d responses", res.Overflow, res.Status, len(res.Responses), c.finite+1)
				}
				return
			}
			if !res.Overflow || res.Code() != CodeStreamedTooMuch || !strings.Contains(res.Status.Message(), "the target streamed more than the harness keeps") {
				t.Errorf("Generate = overflow %v, %v; want overflow, %v saying the target streamed too much", res.Overflow, res.Status, CodeStreamedTooMuch)
			}
			select { // the stream was cancelled: the target's handler ended
			case <-f.ended:
			case <-ctx.Done():
				t.Fatal("the target's stream did not end after Generate returned: the harness did not cancel it")
			}
		})
	}
}
