package nodes

// The clients' handling of the producer's answers to their publish and
// release calls: each is recorded in the history as it arrives, and moves
// its client on (World.Answer) when the client still waits for that call;
// and a call's deadline. The clients' plans, calls, cancellations and
// consume answers are still the world's (sim/world/client.go).

import "github.com/baton-dev/baton/sim/world"

// readyArrive: E's OK to a publish reaches its client (history, then the
// client's next call if it still waits for this one).
func readyArrive(w *world.World, ev world.Event) {
	r := world.ReadyReplyOf(ev)
	w.HistReturn(r.Client, r.Rpc, world.OpPublish, world.ResOK, r.Entry)
	c := w.Clients[r.Client]
	if !w.Current(c, r.Rpc) {
		return
	}
	w.Answer(c, world.ResOK, r.Entry)
}

// publishFailArrive: E's refusal of a publish reaches its client.
func publishFailArrive(w *world.World, ev world.Event) {
	r := world.CallReplyOf(ev)
	w.HistReturn(r.Client, r.Rpc, world.OpPublish, r.Result, "")
	c := w.Clients[r.Client]
	if !w.Current(c, r.Rpc) {
		return
	}
	w.Answer(c, r.Result, "")
}

// releaseReplyArrive: E's answer to a release reaches its client.
func releaseReplyArrive(w *world.World, ev world.Event) {
	r := world.CallReplyOf(ev)
	w.HistReturn(r.Client, r.Rpc, world.OpRelease, r.Result, "")
	c := w.Clients[r.Client]
	if !w.Current(c, r.Rpc) {
		return
	}
	w.Answer(c, r.Result, "")
}

// clientDeadline: the call's answer did not come in time (lost, or a node down).
func clientDeadline(w *world.World, ev world.Event) {
	call := world.ClientCallOf(ev)
	c := w.Clients[call.Client]
	if c.Done || call.Rpc != c.Rpc || c.Stage == world.StageIdle {
		return
	}
	if w.Tracing {
		w.Notef("client %d call %d deadline", c.Idx, call.Rpc)
	}
	w.Answer(c, world.ResUnavailable, "")
}
