package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkKVSessions: E+P+D KV sessions (CONTRACT section 1, roles P and D).
// A session is attached at most once: P answers ABORTED to at most one
// fetch, at most one D decodes from it, and a D decodes only from a
// session P gave it (freed on P when D attached). A client's
// Abort(kv_session) is answered ABORTED at most once, and only for a
// session nobody attached to (SU-3's rule for KV sessions). Checked for
// the sessions changed in the step.
func checkKVSessions(w *world.World) error {
	if len(w.Nodes.Touched) == 0 {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkKVSessionsScan(w)
}

// checkKVSessionsScan is checkKVSessions's scan, once there is something to look at.
func checkKVSessionsScan(w *world.World) error {
	for _, s := range w.Nodes.Touched {
		switch {
		case s.Served > 1:
			return fmt.Errorf("KV session %s of P%d was fetched and released %d times", world.Short(s.Id), s.P, s.Served)
		case len(s.DecodedBy) > 1:
			return fmt.Errorf("KV session %s of P%d was decoded by D%v: attached more than once", world.Short(s.Id), s.P, s.DecodedBy)
		case s.Aborted > 1 || (s.Aborted == 1 && (s.Served > 0 || s.State != world.KvReleased)):
			return fmt.Errorf("KV session %s of P%d answered ABORTED %d time(s) to a client's release (state %s, fetched %d times)", world.Short(s.Id), s.P, s.Aborted, world.KvStateNames[s.State], s.Served)
		case len(s.DecodedBy) == 1 && (s.State != world.KvFetched || s.Served != 1):
			return fmt.Errorf("D%d decoded from KV session %s of P%d that P did not give it (state %s)", s.DecodedBy[0], world.Short(s.Id), s.P, world.KvStateNames[s.State])
		}
	}
	w.Nodes.Touched = w.Nodes.Touched[:0]
	return nil
}

// checkKVSessionsEnd, once the world converged: no KV session is left on
// a P (each was attached, released, expired or drained), and no decode
// request is still open on a D.
func checkKVSessionsEnd(w *world.World) error {
	for _, s := range w.Nodes.Sessions {
		if s.Live(w) {
			return fmt.Errorf("KV session %s of P%d (entry %s) leaked: still held after the drain", world.Short(s.Id), s.P, world.Short(s.Entry))
		}
	}
	for _, r := range w.Nodes.Reqs {
		if r.Arrived && !r.Done {
			return fmt.Errorf("decode request %d on D%d never answered", r.Num, r.D)
		}
	}
	return nil
}
