package simtarget_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/conformance/target/simtarget"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestDirectedTransferFaults: through the FaultInjector and Restarter of a
// simulator target, each fault gives the consumer the contract's answer
// (UNAVAILABLE and a quarantine entered for every uncertain outcome, Q-1,
// Q-2, which Q-6 ends at once: E alive, nothing in flight, the carrier
// closed by the consumer), the proxy-style record of the call, and a
// restart gives a new instance id with nothing quarantined; a reference whose request never
// reached E stays consumable, one whose WRITE landed is spent (SU-2).
func TestDirectedTransferFaults(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		fault       target.TransferFault
		delay       time.Duration
		wantCode    codes.Code
		reached     bool
		upstream    string
		spentOnProd bool
	}{
		{target.FaultNone, 0, codes.OK, true, "OK", true},
		{target.FaultDropRequest, 0, codes.Unavailable, false, "", false},
		{target.FaultDropReply, 0, codes.Unavailable, true, "OK", true},
		{target.FaultDelay, 700 * time.Millisecond, codes.Unavailable, true, "OK", true},
		{target.FaultDelay, 50 * time.Millisecond, codes.OK, true, "OK", true},
		{target.FaultCutConnection, 0, codes.Unavailable, true, "OK", true},
		{target.FaultUnavailable, 0, codes.Unavailable, false, "", false},
		{target.FaultInvalidArgument, 0, codes.Unavailable, false, "", false},
	} {
		t.Run(string(tc.fault)+"-"+tc.delay.String(), func(t *testing.T) {
			tg, err := simtarget.New(simtarget.Options{Seed: 11, Faults: true})
			if err != nil {
				t.Fatal(err)
			}
			var inj target.FaultInjector = tg
			var rs target.Restarter = tg
			if !tg.Profile().FaultProxy {
				t.Fatal("profile does not declare FaultProxy")
			}
			prod, _ := tg.Engine(target.RoleProducer)
			cons, _ := tg.Engine(target.RoleConsumer)
			pub, _ := prod.Generate(ctx, &pb.GenerateRequest{
				Media:   []*pb.MediaItem{{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: []byte("pixels")}}},
				Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}},
			})
			ref := pub.EncoderReady().GetRef()
			consume := func() *target.GenerateResult {
				res, _ := cons.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "<image> hi"},
					Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(4)}, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}})
				return res
			}
			entered := counter(t, cons, "encoder.quarantine.entered")
			if err := inj.SetTransferFaults(target.MethodTransferEncoderCache, tc.delay, tc.fault); err != nil {
				t.Fatal(err)
			}
			if res := consume(); res.Code() != tc.wantCode {
				t.Fatalf("consume under %s = %v; want %s", tc.fault, res.Status, tc.wantCode)
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			calls, err := inj.TransferCalls(wctx, target.MethodTransferEncoderCache, 1)
			if err != nil || len(calls) != 1 {
				t.Fatalf("TransferCalls = %v, %v; want one call", calls, err)
			}
			if c := calls[0]; c.Fault != tc.fault || c.UpstreamReached != tc.reached || c.UpstreamCode != tc.upstream {
				t.Errorf("call = %+v; want fault %s, reached %v, upstream %q", c, tc.fault, tc.reached, tc.upstream)
			}
			// The consumer quarantines exactly when the outcome is uncertain
			// with E alive, the revocation done (nothing in flight) and
			// the connection that carried the request closed by the consumer
			// (no other call used it), Q-6 ends it at once: nothing is left
			// quarantined and the consumer is READY (Q-4 lasted until then).
			uncertain := tc.wantCode != codes.OK
			if n := counter(t, cons, "encoder.quarantine.entered") - entered; uncertain != (n == 1) || n > 1 {
				t.Errorf("after %s: encoder.quarantine.entered went up by %v; want 1 exactly when the outcome is uncertain (Q-1)", tc.fault, n)
			}
			quarantined := counter(t, cons, "encoder.quarantine.buffers")
			if health, _ := cons.Health(ctx); quarantined != 0 || health.GetState() != pb.HealthState_HEALTH_STATE_READY {
				t.Errorf("after %s: quarantine.buffers %v, Health %s; want 0 and READY (Q-6: nothing can land and the consumer closed the carrier, E alive)", tc.fault, quarantined, health.GetState())
			}
			before, _ := cons.GetServerInfo(ctx)
			if err := rs.Restart(ctx, target.RoleConsumer); err != nil {
				t.Fatal(err)
			}
			after, _ := cons.GetServerInfo(ctx)
			if after.GetInstanceId() == before.GetInstanceId() {
				t.Errorf("restart kept instance id %s", after.GetInstanceId())
			}
			if q := counter(t, cons, "encoder.quarantine.buffers"); q != 0 {
				t.Errorf("quarantine.buffers after restart = %v; want 0", q)
			}
			want := codes.OK
			if tc.spentOnProd {
				want = codes.InvalidArgument
			}
			if res := consume(); res.Code() != want {
				t.Errorf("consume after restart = %v; want %s", res.Status, want)
			}
			if msg := tg.CheckHistory(); msg != "" {
				t.Errorf("history: %s", msg)
			}
		})
	}
	if err := func() error {
		tg, _ := simtarget.New(simtarget.Options{Seed: 1})
		return tg.SetTransferFaults(target.MethodTransferEncoderCache, 0, target.FaultDropReply)
	}(); err == nil {
		t.Error("SetTransferFaults on a target made without Faults succeeded")
	}
}

func counter(t *testing.T, e target.Engine, name string) float64 {
	t.Helper()
	l, err := e.GetLoad(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l.GetAttributes().GetFields()[name].GetNumberValue()
}
