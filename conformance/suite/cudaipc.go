package suite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Shutdown of a cuda_ipc consumer (CONTRACT S-3; Faults level, destructive).

// BackendCUDAIPC is the backend S-3 is about (EncoderCacheRef.backend).
const BackendCUDAIPC = "cuda_ipc"

// S3CUDAIPCConsumerDrainsAfterUncertainTransfer hands one entry off over cuda_ipc, makes a second transfer uncertain (reply dropped: the consumer quarantines, Q-1), then shuts the quarantined consumer down with its own id and expects it to drain and leave the wire within its drain deadline: its GPU IPC bookkeeping, which S-3 forbids collecting on an unhealthy consumer, must neither hang nor fail the drain (S-3; destructive; not applicable without cuda_ipc).
func S3CUDAIPCConsumerDrainsAfterUncertainTransfer(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	// A destructive case runs against an instance started for it (CONTRACT
	// "Outcomes of a check"): an earlier one (S-1) may have shut this
	// consumer down.
	if err := f.restart.Restart(ctx, target.RoleConsumer); err != nil {
		HarnessError(t, "restart the consumer for S-3: %v", err)
	}
	f = needFaults(ctx, t, tg)
	if caps := f.encoderCaps("consumer", f.cons); !slices.Contains(caps.GetBackends(), BackendCUDAIPC) {
		t.Errorf("GetModelInfo(consumer).encoder.backends = %v; the profile declares cuda_ipc, want it advertised (N-1)", caps.GetBackends())
	}
	defer f.poisoned(target.RoleConsumer)()
	ready := f.publish(fixture(t, faultImage))
	if b := ready.GetRef().GetBackend(); b != BackendCUDAIPC {
		NotApplicable(t, fmt.Sprintf("the producer publishes %q references, not cuda_ipc", b))
	}
	if _, ok := f.consumeOK(promptText(t, promptMarker), ready.GetRef(), "over cuda_ipc"); !ok {
		return
	}
	uncertain := f.publish(fixture(t, faultImage))
	f.inject(0, target.FaultDropReply)
	res := f.consume(promptText(t, promptMarker), uncertain.GetRef())
	if res.Code() == codes.OK || len(res.TokenIDs()) > 0 {
		t.Errorf("%s with its reply lost = %s; want a failure and no token", consumeCall(uncertain.GetRef(), "reply dropped"), describe(res))
	}
	f.expectQuarantined("consumer", f.cons)
	id := f.instanceID("consumer", f.cons)
	resp, err := f.cons.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: id, DrainTimeoutMs: proto.Uint32(shutdownDrainMs)})
	if err != nil || resp.GetStatus() != pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED {
		t.Fatalf("Shutdown(consumer, expected_instance_id=%q) = %s; want ACCEPTED", id, shutdownAnswer(resp, err))
	}
	accepted := time.Now()
	var last string
	for {
		health, err := f.cons.Health(ctx)
		if gone(err) {
			t.Logf("S-3 the quarantined cuda_ipc consumer left %v after ACCEPTED", time.Since(accepted).Round(time.Millisecond))
			return
		}
		if err != nil {
			last = statusString(err)
		} else {
			last = health.GetState().String()
		}
		if time.Since(accepted) > drainWait {
			t.Errorf("S-3 the quarantined cuda_ipc consumer still answers %v after an accepted Shutdown with drain_timeout_ms %d (last Health: %s); want it drained and gone (its GPU bookkeeping left alone)", drainWait, shutdownDrainMs, last)
			return
		}
		f.waitMs(pollInterval.Milliseconds()*5, "for the consumer to exit")
	}
}
