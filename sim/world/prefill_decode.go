package world

import (
	"encoding/hex"
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
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
// every D handler runs under check_no_encoder_on_decode.go's guard.

// kvState is where a KV session stands on P.
type kvState uint8

const (
	kvLive     kvState = iota + 1
	kvFetched          // D fetched and released it (attached)
	kvReleased         // Abort(kv_session) from the client
	kvExpired          // its TTL passed unfetched
	kvDrained          // P's shutdown released it
)

var kvStateNames = [...]string{kvLive: "live", kvFetched: "attached", kvReleased: "released", kvExpired: "expired", kvDrained: "drained"}

// kvSession is the ground truth about one KV session P held.
type kvSession struct {
	num   int
	id    string
	p     int
	pinc  int64
	entry string
	state kvState
	// served counts the fetches P answered ABORTED (at most 1);
	// decodedBy lists the D nodes that decoded from it (at most 1);
	// aborted counts the ABORTED answers to a client's Abort(kv_session).
	served    int
	decodedBy []int
	aborted   int
}

// live reports whether P still holds s: live, and P's process is the one
// that made it (a crash frees everything the process held).
func (s *kvSession) live(w *World) bool {
	c := w.cons[s.p]
	return s.state == kvLive && c.up && c.inc == s.pinc
}

// prepKind is what a decode request carries as its decode preparation.
type prepKind uint8

const (
	prepOK      prepKind = iota // P's preparation, unchanged
	prepMissing                 // none (SiteDecodeNoPrep): L-2
	prepBadHash                 // a malformed content hash (SiteDecodeBadHash): H-3
)

// decodePrep is a decode preparation as D receives it.
type decodePrep struct {
	sessionID string
	hashes    []string
}

// decodeReq is one decode request to a D node.
type decodeReq struct {
	num     int
	h       int
	rpc     int64
	d       int
	session *kvSession
	// sessionID is the KV session reference's id; entryRef any encoder
	// reference the request carries (always "": N-2, L-2).
	sessionID string
	entryRef  string
	kind      prepKind
	prep      *decodePrep
	// arrived: D received it; ran: D went past its checks (attached and
	// fetched); done: D answered.
	arrived, ran, done bool
	res                int64
}

// decoderNode is a D node: its health (admission, drain) and the sessions
// it attached to (its replay guard).
type decoderNode struct {
	idx      int
	health   *handoff.Health
	attached map[string]bool
}

// clientDecode is a client's E+P+D state after its PrefillReady.
type clientDecode struct {
	session *kvSession
	prep    decodePrep
	// retried: a refused (L-2, H-3) request was sent again properly;
	// replayed: a decoded session was sent again (SiteDecodeReplay).
	retried, replayed bool
	last              *decodeReq
}

// Client stages of E+P+D (client.go's stages end before these).
const (
	stageDecoding clientStage = 64 + iota
	stageKVAborting
)

// resDecodeRefused is D's INVALID_ARGUMENT before execution (L-2, H-3, a
// session not found); resOf maps the core's rejections for the rest.
const resDecodeRefused int64 = 64

func init() { resNames[resDecodeRefused] = "INVALID_ARGUMENT(decode)" }

// startEPPD builds the D nodes.
func (w *World) startEPPD() {
	w.nodes.byID = map[string]*kvSession{}
	w.nodes.prefills = map[[2]int64]*kvSession{}
	w.nodes.decodes = map[int]*clientDecode{}
	for i := 0; i < w.set.Decoders; i++ {
		d := &decoderNode{idx: i, health: handoff.NewHealth(), attached: map[string]bool{}}
		d.health.Started()
		w.nodes.decoders = append(w.nodes.decoders, d)
	}
}

// contentHash is the content hash P puts in the decode preparation for
// entry's image: 64 lowercase hex digits derived from the entry id.
func contentHash(entry string) string { return entry + entry }

// prefillReady: P answers a consume OK (ev, on its way to the client): the
// answer is PrefillReady, so P holds a KV session for it from now on.
func (w *World) prefillReady(ev *event) {
	var b [16]byte
	for i := range b {
		b[i] = byte(w.nodes.rng.Uint32())
	}
	rep := consumeReplyOf(*ev)
	c := w.cons[rep.consumer]
	s := &kvSession{num: len(w.nodes.sessions) + 1, id: hex.EncodeToString(b[:]), p: int(rep.consumer), pinc: c.inc, entry: rep.entry, state: kvLive}
	w.nodes.sessions = append(w.nodes.sessions, s)
	w.nodes.byID[s.id] = s
	w.nodes.prefills[[2]int64{int64(rep.client), rep.rpc}] = s
	w.nodes.touched = append(w.nodes.touched, s)
	w.after(w.set.KVSessionTTLMs, kvExpire{prefill: rep.consumer, session: int64(s.num)}.event())
	if w.tracing {
		w.notef("P%d: PrefillReady for %s with KV session %s", rep.consumer, short(rep.entry), short(s.id))
	}
}

// decodeAnswer moves an E+P+D client on (client.answer's hook): after its
// consume answered OK (PrefillReady) it decodes on D or cancels; after a
// decode or a session release it goes on with its plan. It reports whether
// it handled the answer.
func (w *World) decodeAnswer(c *client, res int64) bool {
	switch c.stage {
	case stageConsuming:
		if res != resOK {
			return false
		}
		s := w.nodes.prefills[[2]int64{int64(c.idx), c.rpc}]
		if s == nil {
			panic(fmt.Sprintf("sim: client %d consume %d answered OK without a PrefillReady", c.idx, c.rpc))
		}
		cd := &clientDecode{session: s, prep: decodePrep{sessionID: s.id, hashes: []string{contentHash(s.entry)}}}
		w.nodes.decodes[c.idx] = cd
		if w.nodes.scripted {
			break // a scenario sends the decode itself (`decode`)
		}
		if chance(w.nodes.rng, 0.1) {
			w.kvAbort(c, cd) // cancelled after PrefillReady: release the session
			return true
		}
		kind := prepOK
		switch {
		case w.faults.buggify(SiteDecodeNoPrep):
			kind = prepMissing
		case w.faults.buggify(SiteDecodeBadHash):
			kind = prepBadHash
		}
		w.decode(c, cd, kind, -1)
		return true
	case stageDecoding:
		cd := w.nodes.decodes[c.idx]
		switch {
		case w.nodes.scripted:
		case res == resDecodeRefused && cd.last.kind != prepOK && !cd.retried:
			cd.retried = true // refused before execution: send it properly
			w.decode(c, cd, prepOK, -1)
			return true
		case res == resOK && !cd.replayed && w.faults.buggify(SiteDecodeReplay):
			cd.replayed = true // the same session again: at most one attach
			w.decode(c, cd, prepOK, -1)
			return true
		}
	case stageKVAborting:
	default:
		return false
	}
	c.stage = stageIdle
	w.next(c)
	return true
}

// decode sends a decode request for cd's session to D node d (-1: one
// drawn at random).
func (w *World) decode(c *client, cd *clientDecode, kind prepKind, d int) {
	if d < 0 {
		d = w.nodes.rng.IntN(len(w.nodes.decoders))
	}
	r := &decodeReq{num: len(w.nodes.reqs) + 1, h: c.idx, d: d, session: cd.session, sessionID: cd.session.id, kind: kind}
	switch kind {
	case prepOK:
		p := cd.prep
		r.prep = &p
	case prepBadHash:
		p := decodePrep{sessionID: cd.prep.sessionID, hashes: []string{cd.prep.hashes[0][:63] + "G"}}
		r.prep = &p
	}
	cd.last = r
	w.nodes.reqs = append(w.nodes.reqs, r)
	c.rpc++
	c.stage = stageDecoding
	r.rpc = c.rpc
	w.send(msgRequest, decodeRequest{client: int32(c.idx), decoder: int32(d), rpc: c.rpc, req: int64(r.num)}.event())
	w.after(w.set.ClientTimeoutMs, clientCall{client: int32(c.idx), rpc: c.rpc}.event(evClientDeadline))
}

// kvAbort: the client releases its KV session on P (Abort(kv_session)).
func (w *World) kvAbort(c *client, cd *clientDecode) {
	c.rpc++
	c.stage = stageKVAborting
	w.send(msgRelease, kvAbort{client: int32(c.idx), prefill: int32(cd.session.p), rpc: c.rpc, session: cd.session.id}.event())
	w.after(w.set.ClientTimeoutMs, clientCall{client: int32(c.idx), rpc: c.rpc}.event(evClientDeadline))
}

// decodeReplyArrive: D's answer to a decode, or P's to Abort(kv_session).
func (w *World) decodeReplyArrive(ev event) {
	rep := callReplyOf(ev)
	c := w.clients[rep.client]
	if !w.current(c, rep.rpc) {
		return
	}
	w.answer(c, rep.result, "")
}

// onDecoder runs a D handler under the N-2 guard.
func (w *World) onDecoder(ev event) {
	before := w.encoderSnapshot()
	switch ev.kind {
	case evDecodeArrive:
		w.decodeArrive(ev)
	case evKVFetchReply:
		w.kvFetchReply(ev)
	case evDecodeFetchDeadline:
		w.decodeFetchDeadline(ev)
	}
	w.checkEncoderUntouched(before, ev)
}

// decodeArrive: D's Generate(kv.session, decode_preparation), checked in
// kvdecode.go's order before anything runs.
func (w *World) decodeArrive(ev event) {
	dr := decodeRequestOf(ev)
	d := w.nodes.decoders[dr.decoder]
	r := w.nodes.reqs[dr.req-1]
	r.arrived = true
	refuse := func(err error) {
		r.done, r.res = true, resDecodeRefused
		if _, code := handoff.Classify(err); code != handoff.CodeInvalidArgument {
			r.res = resOf(err)
		}
		w.nodes.decided = append(w.nodes.decided, r)
		if w.tracing {
			w.notef("D%d refused decode %d: %v", d.idx, r.num, err)
		}
		w.send(msgReply, callReply{client: int32(r.h), rpc: r.rpc, result: r.res}.event(evDecodeReplyArrive))
	}
	if err := w.checkDecodeRequest(r); err != nil {
		refuse(err)
		return
	}
	if err := d.health.Admit(); err != nil {
		refuse(err)
		return
	}
	if d.attached[r.sessionID] {
		refuse(fmt.Errorf("%w: this decode engine already attached to kv.session %s", handoff.ErrBadRequest, short(r.sessionID)))
		return
	}
	// ---- from here the session is spent for this decode engine ----
	d.attached[r.sessionID] = true
	r.ran = true
	w.nodes.decided = append(w.nodes.decided, r)
	if w.tracing {
		w.notef("D%d attached to KV session %s: fetch and release on P%d", d.idx, short(r.sessionID), r.session.p)
	}
	w.send(msgRequest, kvFetch{node: int32(r.session.p), req: int64(r.num)}.event(evKVFetchArrive))
	w.after(w.set.DecodeTimeoutMs, kvFetch{node: dr.decoder, req: int64(r.num)}.event(evDecodeFetchDeadline))
}

// checkDecodeRequest is D's check of the decode preparation (L-2, H-3),
// as ParseDecodePreparation and runDecode decide it.
func (w *World) checkDecodeRequest(r *decodeReq) error {
	if r.prep == nil {
		// Every session of this world comes from a multimodal prefill.
		return fmt.Errorf("%w: L-2 kv.session %s comes from a multimodal prefill and the request carries no decode_preparation", handoff.ErrBadRequest, short(r.sessionID))
	}
	for i, h := range r.prep.hashes {
		if h != "" && !handoff.ValidContentHash(h) {
			return fmt.Errorf("%w: H-3 decode preparation item %d content hash %.80q is not 64 lowercase hex digits", handoff.ErrMalformedHash, i, h)
		}
	}
	if r.prep.sessionID != r.sessionID {
		return fmt.Errorf("%w: L-2 decode preparation of kv.session %s sent with kv.session %s", handoff.ErrBadRequest, short(r.prep.sessionID), short(r.sessionID))
	}
	return nil
}

// kvFetchArrive: P serves D's READ of a session and its release
// (Abort(kv_session)): ABORTED for the one D that takes a live session.
func (w *World) kvFetchArrive(ev event) {
	f := kvFetchOf(ev)
	c := w.cons[f.node]
	r := w.nodes.reqs[f.req-1]
	if !c.up {
		return // connection refused: D's deadline ends it
	}
	s := w.nodes.byID[r.sessionID]
	res := resAlreadyFinished
	if s != nil && s.p == int(f.node) && s.live(w) {
		s.state = kvFetched
		s.served++
		w.nodes.touched = append(w.nodes.touched, s)
		res = resAborted
	}
	if w.tracing {
		w.notef("P%d: fetch and release of KV session %s: %s", f.node, short(r.sessionID), resNames[res])
	}
	w.send(msgReply, kvFetch{node: int32(r.d), req: f.req, result: res}.event(evKVFetchReply))
}

// kvFetchReply: D learns P's answer: ABORTED -> decode; else not found.
func (w *World) kvFetchReply(ev event) {
	f := kvFetchOf(ev)
	r := w.nodes.reqs[f.req-1]
	if r.done {
		if w.tracing {
			w.notef("fetch reply for decode %d ignored: already answered", r.num)
		}
		return
	}
	r.done = true
	if f.result == resAborted {
		r.res = resOK
		r.session.decodedBy = append(r.session.decodedBy, r.d)
		w.nodes.touched = append(w.nodes.touched, r.session)
		if w.tracing {
			w.notef("D%d decodes from KV session %s", r.d, short(r.sessionID))
		}
	} else {
		r.res = resDecodeRefused
		if w.tracing {
			w.notef("D%d: KV session %s not found (already decoded, released or expired)", r.d, short(r.sessionID))
		}
	}
	w.send(msgReply, callReply{client: int32(r.h), rpc: r.rpc, result: r.res}.event(evDecodeReplyArrive))
}

// decodeFetchDeadline: D's own deadline on the fetch passed: UNAVAILABLE
// (the KV transfer failed; the session is freed by P's TTL if nobody took it).
func (w *World) decodeFetchDeadline(ev event) {
	r := w.nodes.reqs[kvFetchOf(ev).req-1]
	if r.done {
		return
	}
	r.done, r.res = true, resUnavailable
	if w.tracing {
		w.notef("D%d: fetch of KV session %s timed out", r.d, short(r.sessionID))
	}
	w.send(msgReply, callReply{client: int32(r.h), rpc: r.rpc, result: resUnavailable}.event(evDecodeReplyArrive))
}

// kvAbortArrive: Abort(kv_session) on P from a client.
func (w *World) kvAbortArrive(ev event) {
	ab := kvAbortOf(ev)
	c := w.cons[ab.prefill]
	if !c.up {
		return
	}
	s := w.nodes.byID[ab.session]
	res := resAlreadyFinished
	if s != nil && s.p == int(ab.prefill) && s.live(w) {
		s.state = kvReleased
		s.aborted++
		w.nodes.touched = append(w.nodes.touched, s)
		res = resAborted
	}
	if w.tracing {
		w.notef("P%d: Abort(kv_session %s): %s", ab.prefill, short(ab.session), resNames[res])
	}
	w.send(msgReply, callReply{client: ab.client, rpc: ab.rpc, result: res}.event(evKVAbortReplyArrive))
}

// kvExpire: a session's TTL on P passed; an unfetched one is freed.
func (w *World) kvExpire(ev event) {
	s := w.nodes.sessions[kvExpireOf(ev).session-1]
	if s.live(w) {
		s.state = kvExpired
		w.nodes.touched = append(w.nodes.touched, s)
		if w.tracing {
			w.notef("P%d: KV session %s expired unfetched", s.p, short(s.id))
		}
	}
}

// drainEPPD: P releases every session it holds; D starts its drain.
func (w *World) drainEPPD() {
	for p := range w.cons {
		w.drainKVSessions(p)
	}
	for _, d := range w.nodes.decoders {
		d.health.StartDrain()
	}
}

// drainKVSessions: P node p releases every KV session it still holds
// (S-2, S-4): the contract's drain, which the engine's P carries out over
// its own session table.
func (w *World) drainKVSessions(p int) {
	for _, s := range w.nodes.sessions {
		if s.p == p && s.live(w) {
			s.state = kvDrained
			w.nodes.touched = append(w.nodes.touched, s)
			if w.tracing {
				w.notef("P%d: drain released KV session %s", p, short(s.id))
			}
		}
	}
}

var prepNames = [...]string{prepOK: "P's own", prepMissing: "missing", prepBadHash: "carrying a malformed hash"}
