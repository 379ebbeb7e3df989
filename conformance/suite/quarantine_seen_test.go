package suite

import (
	"context"
	"strings"
	"testing"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// loadOnly is an engine whose GetLoad answers every CONTRACT section 4
// counter as 0 and, when entered >= 0, ObservableQuarantineEntered.
type loadOnly struct {
	target.Engine
	entered float64
}

func (e *loadOnly) GetLoad(context.Context) (*pb.LoadInfo, error) {
	fields := map[string]any{}
	for _, k := range Observables() {
		fields[k] = 0
	}
	if e.entered >= 0 {
		fields[ObservableQuarantineEntered] = e.entered
	}
	attrs, err := structpb.NewStruct(fields)
	return &pb.LoadInfo{Attributes: attrs}, err
}

// TestQuarantineNotSeenJudgesByEnteredCount: a quarantine the case did not
// see is `not verifiable` on an engine without the entered count (Q-6 may
// have ended it before the case looked), passed when the count rose, and
// failed when the engine offers the count and it did not rise.
func TestQuarantineNotSeenJudgesByEnteredCount(t *testing.T) {
	for _, tt := range []struct {
		name            string
		before, entered float64
		offered         bool
		want            Outcome
	}{
		{"no entered count", 0, -1, false, OutcomeNotVerifiable},
		{"entered and ended", 3, 4, true, OutcomePassed},
		{"never entered", 3, 3, true, OutcomeFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &loadOnly{entered: tt.entered}
			r := runFunc(func(tb TB) {
				f := &faultHarness{harness: &harness{ctx: context.Background(), t: tb, profile: target.Profile{Observables: true}}, entered: map[string]float64{}}
				if tt.offered {
					f.entered["consumer"] = tt.before
				}
				f.quarantineNotSeen("consumer", e, "Health(consumer) after an uncertain transfer = HEALTH_STATE_READY")
			})
			if got := r.outcome(); got != tt.want {
				t.Fatalf("outcome = %s (%s); want %s", got, strings.Join(r.msgs, "; "), tt.want)
			}
		})
	}
}
