package world

import "fmt"

// checkKVSessions: E+P+D KV sessions (CONTRACT section 1, roles P and D).
// A session is attached at most once: P answers ABORTED to at most one
// fetch, at most one D decodes from it, and a D decodes only from a
// session P gave it (freed on P when D attached). A client's
// Abort(kv_session) is answered ABORTED at most once, and only for a
// session nobody attached to (SU-3's rule for KV sessions). Checked for
// the sessions changed in the step.
func checkKVSessions(w *World) error {
	for _, s := range w.nodes.touched {
		switch {
		case s.served > 1:
			return fmt.Errorf("KV session %s of P%d was fetched and released %d times", short(s.id), s.p, s.served)
		case len(s.decodedBy) > 1:
			return fmt.Errorf("KV session %s of P%d was decoded by D%v: attached more than once", short(s.id), s.p, s.decodedBy)
		case s.aborted > 1 || (s.aborted == 1 && (s.served > 0 || s.state != kvReleased)):
			return fmt.Errorf("KV session %s of P%d answered ABORTED %d time(s) to a client's release (state %s, fetched %d times)", short(s.id), s.p, s.aborted, kvStateNames[s.state], s.served)
		case len(s.decodedBy) == 1 && (s.state != kvFetched || s.served != 1):
			return fmt.Errorf("D%d decoded from KV session %s of P%d that P did not give it (state %s)", s.decodedBy[0], short(s.id), s.p, kvStateNames[s.state])
		}
	}
	w.nodes.touched = w.nodes.touched[:0]
	return nil
}

// checkKVSessionsEnd, once the world converged: no KV session is left on
// a P (each was attached, released, expired or drained), and no decode
// request is still open on a D.
func checkKVSessionsEnd(w *World) error {
	for _, s := range w.nodes.sessions {
		if s.live(w) {
			return fmt.Errorf("KV session %s of P%d (entry %s) leaked: still held after the drain", short(s.id), s.p, short(s.entry))
		}
	}
	for _, r := range w.nodes.reqs {
		if r.arrived && !r.done {
			return fmt.Errorf("decode request %d on D%d never answered", r.num, r.d)
		}
	}
	return nil
}
