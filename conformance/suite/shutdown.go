package suite

import (
	"context"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Shutdown cases (CONTRACT S-1).

// shutdownDrainMs is the drain_timeout_ms of the destructive S-1 case.
const shutdownDrainMs = 5000

// allRoles lists the roles in the order S-1 visits them.
var allRoles = []target.Role{target.RoleProducer, target.RoleConsumer, target.RolePrefill, target.RoleDecode, target.RoleBaseline}

// instanceID returns e's ServerInfo.instance_id, or ends the case when
// GetServerInfo fails or the id is empty.
func (h *harness) instanceID(who string, e target.Engine) string {
	h.t.Helper()
	info, err := e.GetServerInfo(h.ctx)
	if err != nil {
		h.t.Fatalf("GetServerInfo(%s) = %s; want ServerInfo with instance_id", who, statusString(err))
	}
	if info.GetInstanceId() == "" {
		h.t.Fatalf("GetServerInfo(%s).instance_id = \"\"; want the instance's id (S-1 matches Shutdown against it)", who)
	}
	return info.GetInstanceId()
}

// S1ShutdownIdentityChecked sends every engine Shutdown with an empty and with a foreign instance id: INVALID_ARGUMENT and FAILED_PRECONDITION, after which Health is not DRAINING and the engine still serves (S-1).
func S1ShutdownIdentityChecked(ctx context.Context, t TB, tg target.Target) {
	h := newHarness(ctx, t, tg)
	defer h.cleanup()
	visited := 0
	for _, role := range allRoles {
		e, ok := tg.Engine(role)
		if !ok {
			continue
		}
		visited++
		who := string(role)
		id := h.instanceID(who, e)
		other := newUUID()
		for other == id {
			other = newUUID()
		}
		for _, c := range []struct {
			id   string
			want codes.Code
		}{{"", codes.InvalidArgument}, {other, codes.FailedPrecondition}} {
			resp, err := e.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: c.id})
			switch {
			case err == nil:
				t.Errorf("Shutdown(%s, expected_instance_id=%q) = %s; want code %s (instance is %q)", who, c.id, shutdownName(resp.GetStatus()), codeName(c.want), id)
			case status.Code(err) != c.want:
				t.Errorf("Shutdown(%s, expected_instance_id=%q) = %s; want code %s", who, c.id, statusString(err), codeName(c.want))
			}
		}
		health, err := e.Health(ctx)
		switch {
		case err != nil:
			t.Errorf("Health(%s) after refused Shutdowns = %s; want a serving state", who, statusString(err))
		case health.GetState() == pb.HealthState_HEALTH_STATE_DRAINING:
			t.Errorf("Health(%s) after refused Shutdowns = DRAINING; want no shutdown started", who)
		}
	}
	if visited == 0 {
		HarnessError(t, "the target names no engine")
	}
	if h.cons != nil {
		expectTokens(t, "Text(prompt) on the consumer after refused Shutdowns", h.generate(h.cons, h.baselineRequest(promptText(t, promptTextOnly))))
	}
	if h.base != nil {
		expectTokens(t, "Text(prompt) on the baseline after refused Shutdowns", h.generate(h.base, h.baselineRequest(promptText(t, promptTextOnly))))
	}
}

// S1ShutdownAccepted shuts the consumer down with its own instance id: ACCEPTED, a repeat ALREADY_SHUTTING_DOWN (or UNAVAILABLE once the process is gone), and a new Generate UNAVAILABLE (S-1; destructive).
func S1ShutdownAccepted(ctx context.Context, t TB, tg target.Target) {
	h := newHarness(ctx, t, tg)
	if !h.profile.Destructive {
		NotVerifiable(t, "the profile does not allow destructive cases (destructive: false), so an accepted Shutdown is unchecked")
	}
	role, e := target.RoleConsumer, h.cons
	if e == nil {
		for _, r := range allRoles {
			if x, ok := tg.Engine(r); ok {
				role, e = r, x
				break
			}
		}
	}
	if e == nil {
		HarnessError(t, "the target names no engine")
	}
	who := string(role)
	id := h.instanceID(who, e)

	req := &pb.ShutdownRequest{ExpectedInstanceId: id, DrainTimeoutMs: proto.Uint32(shutdownDrainMs)}
	resp, err := e.Shutdown(ctx, req)
	if err != nil {
		t.Fatalf("Shutdown(%s, expected_instance_id=%q) = %s; want ACCEPTED", who, id, statusString(err))
	}
	if resp.GetStatus() != pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED {
		t.Errorf("Shutdown(%s, expected_instance_id=%q) = %s; want ACCEPTED", who, id, shutdownName(resp.GetStatus()))
	}
	resp, err = e.Shutdown(ctx, req)
	switch {
	case err != nil && status.Code(err) == codes.Unavailable:
		t.Logf("repeated Shutdown(%s) = %s: the process already exited", who, statusString(err))
	case err != nil:
		t.Errorf("repeated Shutdown(%s, expected_instance_id=%q) = %s; want ALREADY_SHUTTING_DOWN (or UNAVAILABLE once the process exited)", who, id, statusString(err))
	case resp.GetStatus() != pb.ShutdownStatus_SHUTDOWN_STATUS_ALREADY_SHUTTING_DOWN:
		t.Errorf("repeated Shutdown(%s, expected_instance_id=%q) = %s; want ALREADY_SHUTTING_DOWN", who, id, shutdownName(resp.GetStatus()))
	}
	res := h.generate(e, h.baselineRequest(promptText(t, promptTextOnly)))
	expectRejected(t, "Text(prompt) on the "+who+" after an accepted Shutdown", res, codes.Unavailable)
}
