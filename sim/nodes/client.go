package nodes

// The clients' handling of the answers to their publish, consume and
// release calls: each is recorded in the history as it arrives, and moves
// its client on (World.Answer) when the client still waits for that call;
// a call's deadline; and a client's start (its publish) and its cancels.
// The clients' state, plans and calls (World.Call, World.Next) are still
// the world's (sim/world/client.go).

import (
	"slices"

	"github.com/baton-dev/baton/sim/world"
)

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
func publishFailArrive(w *world.World, ev world.Event) { callReplyArrive(w, ev, world.OpPublish) }

// releaseReplyArrive: E's answer to a release reaches its client.
func releaseReplyArrive(w *world.World, ev world.Event) { callReplyArrive(w, ev, world.OpRelease) }

// callReplyArrive: E's answer without an entry (a refused publish, any
// release answer) to a call of kind op reaches its client: recorded in the
// history, and answered if the client still waits for that call.
func callReplyArrive(w *world.World, ev world.Event, op world.OpKind) {
	r := world.CallReplyOf(ev)
	w.HistReturn(r.Client, r.Rpc, op, r.Result, "")
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

// consumeReplyArrive: the PD's answer; an OK is the client-visible consumption SU-1 counts.
func consumeReplyArrive(w *world.World, ev world.Event) {
	r := world.ConsumeReplyOf(ev)
	w.HistReturn(r.Client, r.Rpc, world.OpConsume, r.Result, r.Entry)
	c := w.Clients[r.Client]
	if c.Plan.Probe != world.ProbeNone && r.Rpc == c.ProbeRPC && r.Rpc != 0 {
		w.AddProbeAnswer(world.ProbeAnswer{H: r.Client, Rpc: r.Rpc, Probe: c.Plan.Probe, Entry: r.Entry, Res: r.Result})
	}
	if r.Result == world.ResOK {
		// Counted even if the client stopped waiting: the PD served it. A
		// duplicated reply is the same answer, counted once.
		rec := w.Ledger.Get(r.Entry)
		if !slices.Contains(rec.OkCalls, [2]int64{int64(r.Client), r.Rpc}) {
			w.Ledger.AddOkCall(rec, [2]int64{int64(r.Client), r.Rpc})
			w.Ledger.Touch(rec)
		}
	}
	if !w.Current(c, r.Rpc) {
		return
	}
	w.Answer(c, r.Result, "")
}

// clientStart publishes.
func clientStart(w *world.World, ev world.Event) {
	start := world.ClientCallOf(ev)
	c := w.Clients[start.Client]
	w.Call(c, world.StagePublishing, world.MsgRequest, world.Event{Kind: world.EvPublishArrive})
	if c.Plan.Cancel == world.CancelEncoding {
		w.After(c.Plan.CancelMs, world.ClientCall{Client: start.Client, Rpc: c.Rpc}.Event(world.EvClientCancel))
	}
}

// clientCancel cancels the client's current call: the publish stream (C-1,
// C-7) or, injected, a consume in flight (C-4: the consumer keeps its
// buffers until the outcome is known; the client then releases).
func clientCancel(w *world.World, ev world.Event) {
	call := world.ClientCallOf(ev)
	c := w.Clients[call.Client]
	if c.Done || call.Rpc != c.Rpc {
		return
	}
	switch c.Stage {
	case world.StagePublishing:
		c.CancelledRPC = c.Rpc
		c.Rpc++ // answers to the cancelled call are stale now
		w.Finish(c, "cancelled while publishing")
	case world.StageConsuming, world.StageReplaying:
		consumerCancelled(w, w.Cons[c.CallPD], int32(c.Idx), c.Rpc)
		c.Rpc++
		if w.Tracing {
			w.Notef("client %d cancelled its consume", c.Idx)
		}
		c.ReleasesLeft = max(c.ReleasesLeft, 1)
		w.Next(c)
	}
}
