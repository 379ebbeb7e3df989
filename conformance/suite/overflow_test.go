package suite

import (
	"context"
	"strings"
	"testing"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// floodingEngine answers every Generate as GRPCEngine does for a target
// that streamed past the harness's bound: cut off, Overflow set, no token.
type floodingEngine struct{ target.Engine }

func (floodingEngine) Generate(context.Context, *pb.GenerateRequest) (*target.GenerateResult, error) {
	return &target.GenerateResult{Overflow: true, Responses: []*pb.GenerateResponse{{}},
		Status: status.New(target.CodeStreamedTooMuch, "the target streamed more than the harness keeps of one Generate")}, nil
}

// TestGenerateOverflowFailsTheCase: a target that streams without end
// (attack F7) fails the case whatever the case expected: a check that
// only asks for a rejection (non-OK, no token) would pass the cut-off
// stream otherwise. It is the target's failure, not a harness error.
func TestGenerateOverflowFailsTheCase(t *testing.T) {
	r := runFunc(func(tb TB) {
		h := &harness{ctx: context.Background(), t: tb}
		res := h.generate(floodingEngine{}, &pb.GenerateRequest{RequestId: "flood"})
		if res.Code() == codes.OK || len(res.TokenIDs()) > 0 {
			tb.Errorf("Consume = %s; want a rejection", describe(res))
		}
	})
	if got := r.outcome(); got != OutcomeFailed || !strings.Contains(strings.Join(r.msgs, "; "), "streamed more than") {
		t.Fatalf("outcome = %s (%s); want %s saying the target streamed more than the harness keeps", got, strings.Join(r.msgs, "; "), OutcomeFailed)
	}
}
