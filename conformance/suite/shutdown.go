package suite

import (
	"context"
	"time"

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
		expectTokens(t, "Text(prompt) on the consumer after refused Shutdowns", h.consumerAnswer(h.ctx, h.baselineRequest(promptText(t, promptTextOnly))))
	}
	if h.base != nil {
		expectTokens(t, "Text(prompt) on the baseline after refused Shutdowns", h.generate(h.base, h.baselineRequest(promptText(t, promptTextOnly))))
	}
}

// S1ShutdownAccepted shuts the consumer down with its own instance id: ACCEPTED, a repeat ALREADY_SHUTTING_DOWN (or UNAVAILABLE once the process is gone), and a new Generate UNAVAILABLE (S-1; destructive).
func S1ShutdownAccepted(ctx context.Context, t TB, tg target.Target) {
	h := newHarness(ctx, t, tg)
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
	needRestart(t, tg, "the accepted Shutdown takes the "+who+" down, and it must serve the runs after this one")
	defer h.restartAfter(tg, role)()
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

// Shutdown cases of the Lifecycle level (CONTRACT S-2, S-4; destructive).

// drainWait bounds the wait for a shut-down engine to finish its drain and
// leave: its drain_timeout_ms plus a margin for the process to exit.
const drainWait = shutdownDrainMs*time.Millisecond + 10*time.Second

// gone reports whether err says the engine no longer answers (its process
// exited): UNAVAILABLE from the transport.
func gone(err error) bool { return err != nil && status.Code(err) == codes.Unavailable }

// needRestart returns tg's Restarter, or ends the case not verifiable: the
// case takes an instance down (what says how) that the target must bring
// back (CONTRACT section 4 "A restart"; section 5: Core needs one for the
// accepted Shutdown).
func needRestart(t TB, tg target.Target, what string) target.Restarter {
	t.Helper()
	rs, ok := tg.(target.Restarter)
	if !ok {
		NotVerifiable(t, "needs a restart: "+what+"; the target cannot restart instances (give the profile a launch section: CONTRACT section 4 \"A restart\")")
	}
	return rs
}

// restartAfter restarts role at the end of a destructive case when the
// target can (target.Restarter), so later cases still find the role.
func (h *harness) restartAfter(tg target.Target, role target.Role) func() {
	rs, ok := tg.(target.Restarter)
	return func() {
		h.cleanup()
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), time.Minute)
		defer cancel()
		if err := rs.Restart(ctx, role); err != nil {
			h.t.Errorf("harness error: restart %s after the case: %v", role, err)
		}
	}
}

// S2ShutdownDrainsAndReleases publishes an entry, shuts the producer down with its own id: Health DRAINING (or gone), a new publish UNAVAILABLE, and once the drain ended the unconsumed reference is no longer consumable (S-2; destructive).
func S2ShutdownDrainsAndReleases(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.restartAfter(tg, target.RoleProducer)()
	img := fixture(t, "video-001.jpeg")
	prompt := promptText(t, promptMarker)

	ref := h.publish(img).GetRef()
	id := h.instanceID("producer", h.prod)
	resp, err := h.prod.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: id, DrainTimeoutMs: proto.Uint32(shutdownDrainMs)})
	if err != nil || resp.GetStatus() != pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED {
		t.Fatalf("Shutdown(producer, expected_instance_id=%q) = %s; want ACCEPTED", id, shutdownAnswer(resp, err))
	}
	health, err := h.prod.Health(ctx)
	switch {
	case gone(err):
		t.Logf("Health(producer) right after ACCEPTED = %s: the process already exited", statusString(err))
	case err != nil:
		t.Errorf("S-2 Health(producer) after an accepted Shutdown = %s; want DRAINING (or UNAVAILABLE once the process exited)", statusString(err))
	case health.GetState() != pb.HealthState_HEALTH_STATE_DRAINING:
		t.Errorf("S-2 Health(producer) after an accepted Shutdown = %s%s; want DRAINING", health.GetState(), healthChecks(health))
	}
	res := h.generate(h.prod, h.publishRequest(nil, imageItem(fixture(t, "basn6a08.png"))))
	expectRejected(t, "S-2 Publish(image=basn6a08.png) after an accepted Shutdown", res, codes.Unavailable)

	// Wait for the drain to end: the process leaves, or (observables) the
	// producer holds no entry and no cleanup task.
	deadline := time.Now().Add(drainWait)
	for {
		if _, err := h.prod.Health(ctx); gone(err) {
			break
		}
		if info, err := h.prod.GetLoad(ctx); err == nil && h.profile.Observables {
			if c, err := countersOf(info); err == nil && c[ObservableExportsEntries] == 0 && c[ObservableCleanupPending] == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("S-2 the producer neither left nor emptied its exports within %v of an accepted Shutdown (drain_timeout_ms %d)", drainWait, shutdownDrainMs)
			break
		}
		h.waitMs(pollInterval.Milliseconds()*5, "for the producer's drain")
	}
	note := "published before the producer's Shutdown, never consumed"
	if ref.GetBackend() == sharedDirBackend {
		// The consumer claims shared-directory entries itself: the drain
		// must have removed the entry, a definite rejection.
		h.consumeRejected(prompt, ref, note, codes.InvalidArgument)
		h.expectReady("consumer", h.cons)
		return
	}
	// A transfer backend asks the producer, which may be gone: UNAVAILABLE
	// (uncertain, the consumer may quarantine: Q-1) is as right as
	// INVALID_ARGUMENT; either way no token. Restart the consumer after.
	res = h.consume(prompt, ref)
	if (res.Code() != codes.InvalidArgument && res.Code() != codes.Unavailable) || len(res.TokenIDs()) > 0 {
		t.Errorf("S-2 %s = %s; want INVALID_ARGUMENT (released) or UNAVAILABLE (producer gone) before any token", consumeCall(ref, note), describe(res))
	}
	if rs, ok := tg.(target.Restarter); ok {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := rs.Restart(rctx, target.RoleConsumer); err != nil {
			t.Errorf("harness error: restart the consumer after S-2: %v", err)
		}
	}
}

// sharedDirBackend is EncoderCacheRef.backend of the shared-directory backend.
const sharedDirBackend = "shared_dir"

// shutdownAnswer describes a Shutdown's answer: its status or its error.
func shutdownAnswer(resp *pb.ShutdownResponse, err error) string {
	if err != nil {
		return statusString(err)
	}
	return shutdownName(resp.GetStatus())
}

// S4ShutdownEndsTheProcess shuts an engine down with its own id (the producer, holding a published entry, when it still serves; else the baseline) and expects it to drain and disappear from the wire within its drain deadline, its exports at 0 while it still answers (S-4; destructive).
func S4ShutdownEndsTheProcess(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	role, e := target.RoleProducer, h.prod
	if resp, err := e.Health(ctx); err != nil || resp.GetState() != pb.HealthState_HEALTH_STATE_READY {
		role, e = target.RoleBaseline, h.base // an earlier destructive case shut the producer down
	}
	if e == nil {
		discovered(t, "no engine left to shut down: the producer already shut down and the target has no baseline")
	}
	needRestart(t, tg, "the accepted Shutdown ends the "+string(role)+"'s process")
	defer h.restartAfter(tg, role)()
	who := string(role)
	if role == target.RoleProducer {
		h.publish(fixture(t, "video-001.jpeg"))
	}
	id := h.instanceID(who, e)
	resp, err := e.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: id, DrainTimeoutMs: proto.Uint32(shutdownDrainMs)})
	if err != nil || resp.GetStatus() != pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED {
		t.Fatalf("Shutdown(%s, expected_instance_id=%q) = %s; want ACCEPTED", who, id, shutdownAnswer(resp, err))
	}
	accepted := time.Now()
	var last string
	for {
		health, err := e.Health(ctx)
		if gone(err) {
			t.Logf("S-4 %s left %v after ACCEPTED", who, time.Since(accepted).Round(time.Millisecond))
			return
		}
		switch {
		case err != nil:
			last = statusString(err)
		default:
			last = health.GetState().String()
			if h.profile.Observables {
				if info, err := e.GetLoad(ctx); err == nil {
					if c, err := countersOf(info); err == nil && c[ObservableExportsEntries] != 0 && time.Since(accepted) > shutdownDrainMs*time.Millisecond {
						t.Errorf("S-4 GetLoad(%s) %v after an accepted Shutdown = %s %g; want 0 after the drain", who, time.Since(accepted).Round(time.Millisecond), ObservableExportsEntries, c[ObservableExportsEntries])
					}
				}
			}
		}
		if time.Since(accepted) > drainWait {
			t.Errorf("S-4 %s still answers %v after an accepted Shutdown with drain_timeout_ms %d (last Health: %s); want the process gone", who, drainWait, shutdownDrainMs, last)
			return
		}
		h.waitMs(pollInterval.Milliseconds()*5, "for "+who+" to exit")
	}
}
