package nodes

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/sim/world"
)

// The P and D nodes of E+P+D (CONTRACT section 1, L-1, L-2, N-2, H-3),
// deciding by the contract's rules; the KV session's lifecycle has no core
// package yet, so these are the world's own (the reference engine's P and
// D decide the same rules in their own driver):
//
//   - P is a consumer node: it consumes the encoder output exactly as a PD
//     does (the same consumerNode, core and checks). When it answers a
//     consume OK, that answer is PrefillReady: P holds a KV session (an id
//     of 128 random bits) with the attribute multimodal = true, and hands
//     the client a decode preparation (the session id and one content hash
//     per image). An unfetched session is freed after
//     NodeSettings.KVSessionTTLMs; a session dies with its P's process.
//   - The client sends a decode request to a D node: the KV session
//     reference and the decode preparation, never media or an encoder
//     reference. D decides, before anything runs: a malformed content hash
//     in the preparation is H-3 (handoff.ErrMalformedHash), a multimodal
//     session without a preparation is L-2, a preparation of another
//     session is L-2 (all INVALID_ARGUMENT); then admission (S-2), then its
//     replay guard (a session it attached to before is "not found"). Then
//     it fetches the session from P and releases it there in one round
//     trip (the READ and Abort(kv_session) of kvdecode.go): ABORTED means
//     this D took it and decodes; ALREADY_FINISHED means it was taken,
//     released or expired (INVALID_ARGUMENT, not found); a lost message
//     or an unreachable P is UNAVAILABLE after D's own deadline.
//   - A client that cancels after PrefillReady releases the session on P
//     with Abort(kv_session) (ABORTED once, then ALREADY_FINISHED).
//   - At shutdown P releases every session it still holds (S-2, S-4).
//
// D never touches the encoder, the encoder cache or a reference (N-2):
// every D handler runs under the world's guard (sim/world/observe.go),
// whose record sim/checks' check_no_encoder_on_decode.go reports.

// startEPPD builds the D nodes.
func startEPPD(w *world.World) {
	w.Nodes.ByID = map[string]*world.KvSession{}
	w.Nodes.Prefills = map[[2]int64]*world.KvSession{}
	w.Nodes.Decodes = map[int]*world.ClientDecode{}
	for i := 0; i < w.Set.Decoders; i++ {
		d := &world.DecoderNode{Idx: i, Health: handoff.NewHealth(), Attached: map[string]bool{}}
		d.Health.Started()
		w.Nodes.Decoders = append(w.Nodes.Decoders, d)
	}
}

// prefillReady: P answers a consume OK (ev, on its way to the client): the
// answer is PrefillReady, so P holds a KV session for it from now on.
func prefillReady(w *world.World, ev *world.Event) {
	var b [16]byte
	for i := range b {
		b[i] = byte(w.Nodes.Rng.Uint32())
	}
	rep := world.ConsumeReplyOf(*ev)
	c := w.Cons[rep.Consumer]
	s := &world.KvSession{Num: len(w.Nodes.Sessions) + 1, Id: w.Hex(b[:]), P: int(rep.Consumer), Pinc: c.Inc, Entry: rep.Entry, State: world.KvLive}
	w.Nodes.AddSession(s)
	w.Nodes.ByID[s.Id] = s
	w.Nodes.Prefills[[2]int64{int64(rep.Client), rep.Rpc}] = s
	w.Nodes.Touched = append(w.Nodes.Touched, s)
	w.After(w.Set.KVSessionTTLMs, world.KvExpire{Prefill: rep.Consumer, Session: int64(s.Num)}.Event())
	if w.Tracing {
		w.Notef("P%d: PrefillReady for %s with KV session %s", rep.Consumer, world.Short(rep.Entry), world.Short(s.Id))
	}
}

// decodeAnswer moves an E+P+D client on (client.answer's hook): after its
// consume answered OK (PrefillReady) it decodes on D or cancels; after a
// decode or a session release it goes on with its plan. It reports whether
// it handled the answer.
func decodeAnswer(w *world.World, c *world.Client, res int64) bool {
	switch c.Stage {
	case world.StageConsuming:
		if res != world.ResOK {
			return false
		}
		s := w.Nodes.Prefills[[2]int64{int64(c.Idx), c.Rpc}]
		if s == nil {
			panic(fmt.Sprintf("sim: client %d consume %d answered OK without a PrefillReady", c.Idx, c.Rpc))
		}
		cd := world.NewClientDecode(s, world.ContentHash(s.Entry))
		w.Nodes.Decodes[c.Idx] = cd
		if w.Nodes.Scripted {
			break // a scenario sends the decode itself (`decode`)
		}
		if world.Chance(w.Nodes.Rng, 0.1) {
			kvAbort(w, c, cd) // cancelled after PrefillReady: release the session
			return true
		}
		kind := world.PrepOK
		switch {
		case w.Faults.Buggify(world.SiteDecodeNoPrep):
			kind = world.PrepMissing
		case w.Faults.Buggify(world.SiteDecodeBadHash):
			kind = world.PrepBadHash
		}
		decode(w, c, cd, kind, -1)
		return true
	case world.StageDecoding:
		cd := w.Nodes.Decodes[c.Idx]
		switch {
		case w.Nodes.Scripted:
		case res == world.ResDecodeRefused && cd.Last.Kind != world.PrepOK && !cd.Retried:
			cd.Retried = true // refused before execution: send it properly
			decode(w, c, cd, world.PrepOK, -1)
			return true
		case res == world.ResOK && !cd.Replayed && w.Faults.Buggify(world.SiteDecodeReplay):
			cd.Replayed = true // the same session again: at most one attach
			decode(w, c, cd, world.PrepOK, -1)
			return true
		}
	case world.StageKVAborting:
	default:
		return false
	}
	c.Stage = world.StageIdle
	w.Next(c)
	return true
}

// decode sends a decode request for cd's session to D node d (-1: one
// drawn at random).
func decode(w *world.World, c *world.Client, cd *world.ClientDecode, kind world.PrepKind, d int) {
	if d < 0 {
		d = w.Nodes.Rng.IntN(len(w.Nodes.Decoders))
	}
	r := &world.DecodeReq{Num: len(w.Nodes.Reqs) + 1, H: c.Idx, D: d, Session: cd.Session, SessionID: cd.Session.Id, Kind: kind}
	switch kind {
	case world.PrepOK:
		r.SetPrep(cd.Prep)
	case world.PrepBadHash:
		r.SetPrep(world.DecodePrep{SessionID: cd.Prep.SessionID, Hashes: []string{cd.Prep.Hashes[0][:63] + "G"}})
	}
	cd.Last = r
	w.Nodes.AddReq(r)
	c.Rpc++
	c.Stage = world.StageDecoding
	r.Rpc = c.Rpc
	w.Send(world.MsgRequest, world.DecodeRequest{Client: int32(c.Idx), Decoder: int32(d), Rpc: c.Rpc, Req: int64(r.Num)}.Event())
	w.After(w.Set.ClientTimeoutMs, world.ClientCall{Client: int32(c.Idx), Rpc: c.Rpc}.Event(world.EvClientDeadline))
}

// kvAbort: the client releases its KV session on P (Abort(kv_session)).
func kvAbort(w *world.World, c *world.Client, cd *world.ClientDecode) {
	c.Rpc++
	c.Stage = world.StageKVAborting
	w.Send(world.MsgRelease, world.KvAbort{Client: int32(c.Idx), Prefill: int32(cd.Session.P), Rpc: c.Rpc, Session: cd.Session.Id}.Event())
	w.After(w.Set.ClientTimeoutMs, world.ClientCall{Client: int32(c.Idx), Rpc: c.Rpc}.Event(world.EvClientDeadline))
}

// decodeReplyArrive: D's answer to a decode, or P's to Abort(kv_session).
func decodeReplyArrive(w *world.World, ev world.Event) {
	rep := world.CallReplyOf(ev)
	c := w.Clients[rep.Client]
	if !w.Current(c, rep.Rpc) {
		return
	}
	w.Answer(c, rep.Result, "")
}

// onDecoder runs a D handler under the N-2 guard.
func onDecoder(w *world.World, ev world.Event) {
	before := w.EncoderSnapshot()
	switch ev.Kind {
	case world.EvDecodeArrive:
		decodeArrive(w, ev)
	case world.EvKVFetchReply:
		kvFetchReply(w, ev)
	case world.EvDecodeFetchDeadline:
		decodeFetchDeadline(w, ev)
	}
	w.CheckEncoderUntouched(before, ev)
}

// decodeArrive: D's Generate(kv.session, decode_preparation), checked in
// kvdecode.go's order before anything runs.
func decodeArrive(w *world.World, ev world.Event) {
	dr := world.DecodeRequestOf(ev)
	d := w.Nodes.Decoders[dr.Decoder]
	r := w.Nodes.Reqs[dr.Req-1]
	r.Arrived = true
	refuse := func(err error) {
		r.Done, r.Res = true, world.ResDecodeRefused
		if _, code := handoff.Classify(err); code != handoff.CodeInvalidArgument {
			r.Res = world.ResOf(err)
		}
		w.Nodes.Decided = append(w.Nodes.Decided, r)
		if w.Tracing {
			w.Notef("D%d refused decode %d: %v", d.Idx, r.Num, err)
		}
		w.Send(world.MsgReply, world.CallReply{Client: int32(r.H), Rpc: r.Rpc, Result: r.Res}.Event(world.EvDecodeReplyArrive))
	}
	if err := CheckDecodeRequest(w, r); err != nil {
		refuse(err)
		return
	}
	if err := d.Health.Admit(); err != nil {
		refuse(err)
		return
	}
	if d.Attached[r.SessionID] {
		refuse(fmt.Errorf("%w: this decode engine already attached to kv.session %s", handoff.ErrBadRequest, world.Short(r.SessionID)))
		return
	}
	// ---- from here the session is spent for this decode engine ----
	d.Attached[r.SessionID] = true
	r.Ran = true
	w.Nodes.Decided = append(w.Nodes.Decided, r)
	if w.Tracing {
		w.Notef("D%d attached to KV session %s: fetch and release on P%d", d.Idx, world.Short(r.SessionID), r.Session.P)
	}
	w.Send(world.MsgRequest, world.KvFetch{Node: int32(r.Session.P), Req: int64(r.Num)}.Event(world.EvKVFetchArrive))
	w.After(w.Set.DecodeTimeoutMs, world.KvFetch{Node: dr.Decoder, Req: int64(r.Num)}.Event(world.EvDecodeFetchDeadline))
}

// CheckDecodeRequest is D's check of the decode preparation (L-2, H-3),
// as ParseDecodePreparation and runDecode decide it.
func CheckDecodeRequest(w *world.World, r *world.DecodeReq) error {
	if r.Prep == nil {
		// Every session of this world comes from a multimodal prefill.
		return fmt.Errorf("%w: L-2 kv.session %s comes from a multimodal prefill and the request carries no decode_preparation", handoff.ErrBadRequest, world.Short(r.SessionID))
	}
	for i, h := range r.Prep.Hashes {
		if h != "" && !handoff.ValidContentHash(h) {
			return fmt.Errorf("%w: H-3 decode preparation item %d content hash %.80q is not 64 lowercase hex digits", handoff.ErrMalformedHash, i, h)
		}
	}
	if r.Prep.SessionID != r.SessionID {
		return fmt.Errorf("%w: L-2 decode preparation of kv.session %s sent with kv.session %s", handoff.ErrBadRequest, world.Short(r.Prep.SessionID), world.Short(r.SessionID))
	}
	return nil
}

// kvFetchArrive: P serves D's READ of a session and its release
// (Abort(kv_session)): ABORTED for the one D that takes a live session.
func kvFetchArrive(w *world.World, ev world.Event) {
	f := world.KvFetchOf(ev)
	c := w.Cons[f.Node]
	r := w.Nodes.Reqs[f.Req-1]
	if !c.Up {
		return // connection refused: D's deadline ends it
	}
	s := w.Nodes.ByID[r.SessionID]
	res := world.ResAlreadyFinished
	if s != nil && s.P == int(f.Node) && s.Live(w) {
		s.State = world.KvFetched
		s.Served++
		w.Nodes.Touched = append(w.Nodes.Touched, s)
		res = world.ResAborted
	}
	if w.Tracing {
		w.Notef("P%d: fetch and release of KV session %s: %s", f.Node, world.Short(r.SessionID), world.ResNames[res])
	}
	w.Send(world.MsgReply, world.KvFetch{Node: int32(r.D), Req: f.Req, Result: res}.Event(world.EvKVFetchReply))
}

// kvFetchReply: D learns P's answer: ABORTED -> decode; else not found.
func kvFetchReply(w *world.World, ev world.Event) {
	f := world.KvFetchOf(ev)
	r := w.Nodes.Reqs[f.Req-1]
	if r.Done {
		if w.Tracing {
			w.Notef("fetch reply for decode %d ignored: already answered", r.Num)
		}
		return
	}
	r.Done = true
	if f.Result == world.ResAborted {
		r.Res = world.ResOK
		r.Session.DecodedBy = append(r.Session.DecodedBy, r.D)
		w.Nodes.Touched = append(w.Nodes.Touched, r.Session)
		if w.Tracing {
			w.Notef("D%d decodes from KV session %s", r.D, world.Short(r.SessionID))
		}
	} else {
		r.Res = world.ResDecodeRefused
		if w.Tracing {
			w.Notef("D%d: KV session %s not found (already decoded, released or expired)", r.D, world.Short(r.SessionID))
		}
	}
	w.Send(world.MsgReply, world.CallReply{Client: int32(r.H), Rpc: r.Rpc, Result: r.Res}.Event(world.EvDecodeReplyArrive))
}

// decodeFetchDeadline: D's own deadline on the fetch passed: UNAVAILABLE
// (the KV transfer failed; the session is freed by P's TTL if nobody took it).
func decodeFetchDeadline(w *world.World, ev world.Event) {
	r := w.Nodes.Reqs[world.KvFetchOf(ev).Req-1]
	if r.Done {
		return
	}
	r.Done, r.Res = true, world.ResUnavailable
	if w.Tracing {
		w.Notef("D%d: fetch of KV session %s timed out", r.D, world.Short(r.SessionID))
	}
	w.Send(world.MsgReply, world.CallReply{Client: int32(r.H), Rpc: r.Rpc, Result: world.ResUnavailable}.Event(world.EvDecodeReplyArrive))
}

// kvAbortArrive: Abort(kv_session) on P from a client.
func kvAbortArrive(w *world.World, ev world.Event) {
	ab := world.KvAbortOf(ev)
	c := w.Cons[ab.Prefill]
	if !c.Up {
		return
	}
	s := w.Nodes.ByID[ab.Session]
	res := world.ResAlreadyFinished
	if s != nil && s.P == int(ab.Prefill) && s.Live(w) {
		s.State = world.KvReleased
		s.Aborted++
		w.Nodes.Touched = append(w.Nodes.Touched, s)
		res = world.ResAborted
	}
	if w.Tracing {
		w.Notef("P%d: Abort(kv_session %s): %s", ab.Prefill, world.Short(ab.Session), world.ResNames[res])
	}
	w.Send(world.MsgReply, world.CallReply{Client: ab.Client, Rpc: ab.Rpc, Result: res}.Event(world.EvKVAbortReplyArrive))
}

// kvExpire: a session's TTL on P passed; an unfetched one is freed.
func kvExpire(w *world.World, ev world.Event) {
	s := w.Nodes.Sessions[world.KvExpireOf(ev).Session-1]
	if s.Live(w) {
		s.State = world.KvExpired
		w.Nodes.Touched = append(w.Nodes.Touched, s)
		if w.Tracing {
			w.Notef("P%d: KV session %s expired unfetched", s.P, world.Short(s.Id))
		}
	}
}

// drainEPPD: P releases every session it holds; D starts its drain.
func drainEPPD(w *world.World) {
	for p := range w.Cons {
		drainKVSessions(w, p)
	}
	for _, d := range w.Nodes.Decoders {
		d.Health.StartDrain()
	}
}

// drainKVSessions: P node p releases every KV session it still holds
// (S-2, S-4): the contract's drain, which the engine's P carries out over
// its own session table.
func drainKVSessions(w *world.World, p int) {
	for _, s := range w.Nodes.Sessions {
		if s.P == p && s.Live(w) {
			s.State = world.KvDrained
			w.Nodes.Touched = append(w.Nodes.Touched, s)
			if w.Tracing {
				w.Notef("P%d: drain released KV session %s", p, world.Short(s.Id))
			}
		}
	}
}
