package props

import (
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/status"
	"pgregory.net/rapid"
)

// check runs after every action: Health READY on every role still up (Q-4,
// nothing here quarantines or fails a cleanup), and with observables
// the producer's entries within the model's range, no quarantine anywhere
// and, unless a consume was cancelled in flight, no receive in flight.
func (mc *machine) check(t *rapid.T) {
	for _, role := range []string{"producer", "consumer"} {
		if mc.m.down[role] {
			continue
		}
		e := mc.engine(role)
		mc.expectReady(t, role, e)
		c, ok := mc.counters(t, role, e)
		if !ok {
			continue
		}
		if q := c[obsQuarantineBuffers]; q != 0 {
			t.Fatalf("GetLoad(%s) %s = %v; want 0: nothing in this run's history is uncertain (Q-1, Q-3)", role, obsQuarantineBuffers, q)
		}
		switch role {
		case "producer":
			lo, hi := mc.m.entriesRange()
			got := int(c[obsEntries]) - mc.entries0
			lo -= mc.inherited
			if got < lo || got > hi {
				why := "an entry the model holds live left the table (SU-4: a rejected reference consumes and releases nothing; SU-6)"
				if got > hi {
					why = "more entries than the model can explain: a leak (C-1, C-3, C-7)"
				}
				t.Fatalf("GetLoad(producer) %s = %d (%d at the start of the check) with %s; want %d..%d: %s",
					obsEntries, got+mc.entries0, mc.entries0, mc.summary(), lo+mc.entries0, hi+mc.entries0, why)
			}
		case "consumer":
			if n := c[obsInflight]; n != 0 && mc.m.uncertainConsumes == 0 {
				t.Fatalf("GetLoad(consumer) %s = %v after every consume returned; want 0 (C-4: nothing leaks)", obsInflight, n)
			}
		}
	}
}

// finish releases every reference the check made and waits (bounded by
// SettleTimeout) until the producer's table is back where it began (give
// or take the entries of publishes cancelled in flight, which may live
// until their TTL) and the consumer has nothing in flight: nothing leaked
// (C-3, C-7).
func (mc *machine) finish(t *rapid.T) {
	if mc.m.down["producer"] {
		return
	}
	for _, r := range mc.m.refs {
		mc.releaseRef(t, r, "end of check")
	}
	mc.released = true
	start := time.Now()
	deadline := start.Add(mc.cfg.SettleTimeout)
	if mc.m.orphans > 0 {
		// A publish cancelled in flight may still be running on the
		// producer; its entry may appear (and leave) after this check
		// ends. Wait until the producer runs nothing (LoadInfo.running_requests,
		// where the target reports it), so the entry is counted here.
		for mc.running(t) > 0 && time.Now().Before(deadline) {
			waitPoll()
		}
	}
	for {
		pc, ok := mc.counters(t, "producer", mc.prod)
		if !ok {
			return
		}
		inflight := 0.0
		if !mc.m.down["consumer"] {
			cc, _ := mc.counters(t, "consumer", mc.cons)
			inflight = cc[obsInflight]
		}
		// A publish cancelled in flight may have been answered on the
		// engine's side just before the cancellation reached it: its entry
		// then lives until its TTL, so up to m.orphans entries may
		// remain; the next check starts from wherever this one ends.
		base := mc.entries0 - mc.inherited // entries certainly not this check's
		e := int(pc[obsEntries])
		if inflight == 0 && (e == base || (time.Since(start) > orphanWait && e >= base && e <= mc.entries0+mc.m.orphans)) {
			mc.lingering = e - base
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after releasing every reference of the check: GetLoad(producer) %s = %v (want %d, as at the start, plus at most %d cancelled publishes), GetLoad(consumer) %s = %v (want 0) within %v; %s",
				obsEntries, pc[obsEntries], mc.entries0, mc.m.orphans, obsInflight, inflight, mc.cfg.SettleTimeout, mc.summary())
		}
		waitPoll()
	}
}

// running returns the producer's LoadInfo.running_requests (0 when the
// target does not report it).
func (mc *machine) running(t *rapid.T) uint32 {
	ctx, cancel := mc.ctx()
	defer cancel()
	info, err := mc.prod.GetLoad(ctx)
	if err != nil {
		t.Fatalf("GetLoad(producer) = %s", statusString(err))
	}
	return info.GetRunningRequests()
}

// orphanWait is how long finish waits for the entries of publishes
// cancelled in flight to leave before it accepts that they live on.
const orphanWait = time.Second

// waitPoll is the pause between two polls of the observables while
// settling (CONTRACT section 4 gives no completion event to wait on).
func waitPoll() { time.Sleep(10 * time.Millisecond) }

func (mc *machine) engine(role string) target.Engine {
	if role == "consumer" {
		return mc.cons
	}
	return mc.prod
}

// summary describes the model for failure messages.
func (mc *machine) summary() string {
	return fmt.Sprintf("model: %d live, %d consumed (%d not yet seen by the producer), %d released, %d unknown, %d cancelled publishes",
		mc.m.count(stateLive), mc.m.count(stateConsumed), mc.m.unobserved(), mc.m.count(stateReleased), mc.m.count(stateUnknown), mc.m.orphans)
}

func (mc *machine) expectReady(t *rapid.T, role string, e target.Engine) {
	t.Helper()
	ctx, cancel := mc.ctx()
	defer cancel()
	resp, err := e.Health(ctx)
	if err != nil || resp.GetState() != pb.HealthState_HEALTH_STATE_READY {
		var checks, messages []string
		for _, c := range resp.GetChecks() {
			checks = append(checks, c.GetName()+"="+c.GetState().String())
			messages = append(messages, c.GetName()+": "+c.GetMessage())
		}
		// The messages (entry ids) and the status text differ from one
		// replay to the next; rapid shrinks only while the failure's
		// message stays the same, so they are logged, not in it.
		t.Logf("Health(%s): %s; %s", role, statusString(err), strings.Join(messages, "; "))
		t.Fatalf("Health(%s) = %s (code %s) [%s]; want READY (Q-4, X-1: nothing was quarantined, no cleanup failed)", role, resp.GetState(), codeName(status.Code(err)), strings.Join(checks, "; "))
	}
}

// Observable keys (CONTRACT section 4).
const (
	obsEntries           = "encoder.exports.entries"
	obsInflight          = "encoder.receives.inflight"
	obsQuarantineBuffers = "encoder.quarantine.buffers"
	// obsQuarantineEntered (optional, the reference engine's): quarantines
	// ever entered, so one that Q-6 ended at once still shows.
	obsQuarantineEntered = "encoder.quarantine.entered"
)

// counters reads e's observables; false when the profile declares none.
func (mc *machine) counters(t *rapid.T, role string, e target.Engine) (map[string]float64, bool) {
	t.Helper()
	if !mc.profile.Observables {
		return nil, false
	}
	ctx, cancel := mc.ctx()
	defer cancel()
	info, err := e.GetLoad(ctx)
	if err != nil {
		t.Fatalf("GetLoad(%s) = %s; want the CONTRACT section 4 observables (the profile declares them)", role, statusString(err))
	}
	out := map[string]float64{}
	for _, k := range []string{obsEntries, obsInflight, obsQuarantineBuffers} {
		v, ok := info.GetAttributes().GetFields()[k]
		if !ok {
			t.Fatalf("GetLoad(%s) lacks %s (the profile declares observables)", role, k)
		}
		out[k] = v.GetNumberValue()
	}
	if v, ok := info.GetAttributes().GetFields()[obsQuarantineEntered]; ok {
		out[obsQuarantineEntered] = v.GetNumberValue()
	} else {
		out[obsQuarantineEntered] = -1 // not offered
	}
	return out, true
}
