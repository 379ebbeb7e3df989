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
	KvLive     kvState = iota + 1
	KvFetched          // D fetched and released it (attached)
	KvReleased         // Abort(kv_session) from the client
	kvExpired          // its TTL passed unfetched
	kvDrained          // P's shutdown released it
)

var KvStateNames = [...]string{KvLive: "live", KvFetched: "attached", KvReleased: "released", kvExpired: "expired", kvDrained: "drained"}

// KvSession is the ground truth about one KV session P held.
type KvSession struct {
	Num   int
	Id    string
	P     int
	Pinc  int64
	Entry string
	State kvState
	// Served counts the fetches P answered ABORTED (at most 1);
	// decodedBy lists the D nodes that decoded from it (at most 1);
	// aborted counts the ABORTED answers to a client's Abort(kv_session).
	Served    int
	DecodedBy []int
	Aborted   int
}

// Live reports whether P still holds s: live, and P's process is the one
// that made it (a crash frees everything the process held).
func (s *KvSession) Live(w *World) bool {
	c := w.Cons[s.P]
	return s.State == KvLive && c.Up && c.Inc == s.Pinc
}

// PrepKind is what a decode request carries as its decode preparation.
type PrepKind uint8

const (
	PrepOK      PrepKind = iota // P's preparation, unchanged
	PrepMissing                 // none (SiteDecodeNoPrep): L-2
	PrepBadHash                 // a malformed content hash (SiteDecodeBadHash): H-3
)

// DecodePrep is a decode preparation as D receives it.
type DecodePrep struct {
	SessionID string
	Hashes    []string
}

// DecodeReq is one decode request to a D node.
type DecodeReq struct {
	Num     int
	h       int
	rpc     int64
	D       int
	Session *KvSession
	// SessionID is the KV session reference's id; entryRef any encoder
	// reference the request carries (always "": N-2, L-2).
	SessionID string
	entryRef  string
	Kind      PrepKind
	Prep      *DecodePrep
	// Arrived: D received it; ran: D went past its checks (attached and
	// fetched); done: D answered.
	Arrived, Ran, Done bool
	Res                int64
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
	session *KvSession
	prep    DecodePrep
	// retried: a refused (L-2, H-3) request was sent again properly;
	// replayed: a decoded session was sent again (SiteDecodeReplay).
	retried, replayed bool
	last              *DecodeReq
}

// Client stages of E+P+D (client.go's stages end before these).
const (
	stageDecoding clientStage = 64 + iota
	stageKVAborting
)

// ResDecodeRefused is D's INVALID_ARGUMENT before execution (L-2, H-3, a
// session not found); resOf maps the core's rejections for the rest.
const ResDecodeRefused int64 = 64

func init() { ResNames[ResDecodeRefused] = "INVALID_ARGUMENT(decode)" }

// startEPPD builds the D nodes.
func (w *World) startEPPD() {
	w.Nodes.byID = map[string]*KvSession{}
	w.Nodes.prefills = map[[2]int64]*KvSession{}
	w.Nodes.decodes = map[int]*clientDecode{}
	for i := 0; i < w.Set.Decoders; i++ {
		d := &decoderNode{idx: i, health: handoff.NewHealth(), attached: map[string]bool{}}
		d.health.Started()
		w.Nodes.decoders = append(w.Nodes.decoders, d)
	}
}

// ContentHash is the content hash P puts in the decode preparation for
// entry's image: 64 lowercase hex digits derived from the entry id.
func ContentHash(entry string) string { return entry + entry }

// prefillReady: P answers a consume OK (ev, on its way to the client): the
// answer is PrefillReady, so P holds a KV session for it from now on.
func (w *World) prefillReady(ev *Event) {
	var b [16]byte
	for i := range b {
		b[i] = byte(w.Nodes.Rng.Uint32())
	}
	rep := consumeReplyOf(*ev)
	c := w.Cons[rep.consumer]
	s := &KvSession{Num: len(w.Nodes.Sessions) + 1, Id: hex.EncodeToString(b[:]), P: int(rep.consumer), Pinc: c.Inc, Entry: rep.entry, State: KvLive}
	w.Nodes.Sessions = append(w.Nodes.Sessions, s)
	w.Nodes.byID[s.Id] = s
	w.Nodes.prefills[[2]int64{int64(rep.client), rep.rpc}] = s
	w.Nodes.Touched = append(w.Nodes.Touched, s)
	w.After(w.Set.KVSessionTTLMs, kvExpire{prefill: rep.consumer, session: int64(s.Num)}.event())
	if w.Tracing {
		w.Notef("P%d: PrefillReady for %s with KV session %s", rep.consumer, Short(rep.entry), Short(s.Id))
	}
}

// decodeAnswer moves an E+P+D client on (client.answer's hook): after its
// consume answered OK (PrefillReady) it decodes on D or cancels; after a
// decode or a session release it goes on with its plan. It reports whether
// it handled the answer.
func (w *World) decodeAnswer(c *client, res int64) bool {
	switch c.Stage {
	case stageConsuming:
		if res != ResOK {
			return false
		}
		s := w.Nodes.prefills[[2]int64{int64(c.Idx), c.rpc}]
		if s == nil {
			panic(fmt.Sprintf("sim: client %d consume %d answered OK without a PrefillReady", c.Idx, c.rpc))
		}
		cd := &clientDecode{session: s, prep: DecodePrep{SessionID: s.Id, Hashes: []string{ContentHash(s.Entry)}}}
		w.Nodes.decodes[c.Idx] = cd
		if w.Nodes.scripted {
			break // a scenario sends the decode itself (`decode`)
		}
		if chance(w.Nodes.Rng, 0.1) {
			w.kvAbort(c, cd) // cancelled after PrefillReady: release the session
			return true
		}
		kind := PrepOK
		switch {
		case w.Faults.Buggify(SiteDecodeNoPrep):
			kind = PrepMissing
		case w.Faults.Buggify(SiteDecodeBadHash):
			kind = PrepBadHash
		}
		w.decode(c, cd, kind, -1)
		return true
	case stageDecoding:
		cd := w.Nodes.decodes[c.Idx]
		switch {
		case w.Nodes.scripted:
		case res == ResDecodeRefused && cd.last.Kind != PrepOK && !cd.retried:
			cd.retried = true // refused before execution: send it properly
			w.decode(c, cd, PrepOK, -1)
			return true
		case res == ResOK && !cd.replayed && w.Faults.Buggify(SiteDecodeReplay):
			cd.replayed = true // the same session again: at most one attach
			w.decode(c, cd, PrepOK, -1)
			return true
		}
	case stageKVAborting:
	default:
		return false
	}
	c.Stage = stageIdle
	w.next(c)
	return true
}

// decode sends a decode request for cd's session to D node d (-1: one
// drawn at random).
func (w *World) decode(c *client, cd *clientDecode, kind PrepKind, d int) {
	if d < 0 {
		d = w.Nodes.Rng.IntN(len(w.Nodes.decoders))
	}
	r := &DecodeReq{Num: len(w.Nodes.Reqs) + 1, h: c.Idx, D: d, Session: cd.session, SessionID: cd.session.Id, Kind: kind}
	switch kind {
	case PrepOK:
		p := cd.prep
		r.Prep = &p
	case PrepBadHash:
		p := DecodePrep{SessionID: cd.prep.SessionID, Hashes: []string{cd.prep.Hashes[0][:63] + "G"}}
		r.Prep = &p
	}
	cd.last = r
	w.Nodes.Reqs = append(w.Nodes.Reqs, r)
	c.rpc++
	c.Stage = stageDecoding
	r.rpc = c.rpc
	w.send(msgRequest, decodeRequest{client: int32(c.Idx), decoder: int32(d), rpc: c.rpc, req: int64(r.Num)}.event())
	w.After(w.Set.ClientTimeoutMs, clientCall{client: int32(c.Idx), rpc: c.rpc}.event(evClientDeadline))
}

// kvAbort: the client releases its KV session on P (Abort(kv_session)).
func (w *World) kvAbort(c *client, cd *clientDecode) {
	c.rpc++
	c.Stage = stageKVAborting
	w.send(msgRelease, kvAbort{client: int32(c.Idx), prefill: int32(cd.session.P), rpc: c.rpc, session: cd.session.Id}.event())
	w.After(w.Set.ClientTimeoutMs, clientCall{client: int32(c.Idx), rpc: c.rpc}.event(evClientDeadline))
}

// decodeReplyArrive: D's answer to a decode, or P's to Abort(kv_session).
func (w *World) decodeReplyArrive(ev Event) {
	rep := callReplyOf(ev)
	c := w.Clients[rep.client]
	if !w.current(c, rep.rpc) {
		return
	}
	w.answer(c, rep.result, "")
}

// onDecoder runs a D handler under the N-2 guard.
func (w *World) onDecoder(ev Event) {
	before := w.EncoderSnapshot()
	switch ev.Kind {
	case evDecodeArrive:
		w.decodeArrive(ev)
	case EvKVFetchReply:
		w.kvFetchReply(ev)
	case evDecodeFetchDeadline:
		w.decodeFetchDeadline(ev)
	}
	w.CheckEncoderUntouched(before, ev)
}

// decodeArrive: D's Generate(kv.session, decode_preparation), checked in
// kvdecode.go's order before anything runs.
func (w *World) decodeArrive(ev Event) {
	dr := decodeRequestOf(ev)
	d := w.Nodes.decoders[dr.decoder]
	r := w.Nodes.Reqs[dr.req-1]
	r.Arrived = true
	refuse := func(err error) {
		r.Done, r.Res = true, ResDecodeRefused
		if _, code := handoff.Classify(err); code != handoff.CodeInvalidArgument {
			r.Res = resOf(err)
		}
		w.Nodes.Decided = append(w.Nodes.Decided, r)
		if w.Tracing {
			w.Notef("D%d refused decode %d: %v", d.idx, r.Num, err)
		}
		w.send(msgReply, callReply{client: int32(r.h), rpc: r.rpc, result: r.Res}.event(evDecodeReplyArrive))
	}
	if err := w.CheckDecodeRequest(r); err != nil {
		refuse(err)
		return
	}
	if err := d.health.Admit(); err != nil {
		refuse(err)
		return
	}
	if d.attached[r.SessionID] {
		refuse(fmt.Errorf("%w: this decode engine already attached to kv.session %s", handoff.ErrBadRequest, Short(r.SessionID)))
		return
	}
	// ---- from here the session is spent for this decode engine ----
	d.attached[r.SessionID] = true
	r.Ran = true
	w.Nodes.Decided = append(w.Nodes.Decided, r)
	if w.Tracing {
		w.Notef("D%d attached to KV session %s: fetch and release on P%d", d.idx, Short(r.SessionID), r.Session.P)
	}
	w.send(msgRequest, kvFetch{node: int32(r.Session.P), req: int64(r.Num)}.event(evKVFetchArrive))
	w.After(w.Set.DecodeTimeoutMs, kvFetch{node: dr.decoder, req: int64(r.Num)}.event(evDecodeFetchDeadline))
}

// CheckDecodeRequest is D's check of the decode preparation (L-2, H-3),
// as ParseDecodePreparation and runDecode decide it.
func (w *World) CheckDecodeRequest(r *DecodeReq) error {
	if r.Prep == nil {
		// Every session of this world comes from a multimodal prefill.
		return fmt.Errorf("%w: L-2 kv.session %s comes from a multimodal prefill and the request carries no decode_preparation", handoff.ErrBadRequest, Short(r.SessionID))
	}
	for i, h := range r.Prep.Hashes {
		if h != "" && !handoff.ValidContentHash(h) {
			return fmt.Errorf("%w: H-3 decode preparation item %d content hash %.80q is not 64 lowercase hex digits", handoff.ErrMalformedHash, i, h)
		}
	}
	if r.Prep.SessionID != r.SessionID {
		return fmt.Errorf("%w: L-2 decode preparation of kv.session %s sent with kv.session %s", handoff.ErrBadRequest, Short(r.Prep.SessionID), Short(r.SessionID))
	}
	return nil
}

// kvFetchArrive: P serves D's READ of a session and its release
// (Abort(kv_session)): ABORTED for the one D that takes a live session.
func (w *World) kvFetchArrive(ev Event) {
	f := kvFetchOf(ev)
	c := w.Cons[f.node]
	r := w.Nodes.Reqs[f.req-1]
	if !c.Up {
		return // connection refused: D's deadline ends it
	}
	s := w.Nodes.byID[r.SessionID]
	res := resAlreadyFinished
	if s != nil && s.P == int(f.node) && s.Live(w) {
		s.State = KvFetched
		s.Served++
		w.Nodes.Touched = append(w.Nodes.Touched, s)
		res = resAborted
	}
	if w.Tracing {
		w.Notef("P%d: fetch and release of KV session %s: %s", f.node, Short(r.SessionID), ResNames[res])
	}
	w.send(msgReply, kvFetch{node: int32(r.D), req: f.req, result: res}.event(EvKVFetchReply))
}

// kvFetchReply: D learns P's answer: ABORTED -> decode; else not found.
func (w *World) kvFetchReply(ev Event) {
	f := kvFetchOf(ev)
	r := w.Nodes.Reqs[f.req-1]
	if r.Done {
		if w.Tracing {
			w.Notef("fetch reply for decode %d ignored: already answered", r.Num)
		}
		return
	}
	r.Done = true
	if f.result == resAborted {
		r.Res = ResOK
		r.Session.DecodedBy = append(r.Session.DecodedBy, r.D)
		w.Nodes.Touched = append(w.Nodes.Touched, r.Session)
		if w.Tracing {
			w.Notef("D%d decodes from KV session %s", r.D, Short(r.SessionID))
		}
	} else {
		r.Res = ResDecodeRefused
		if w.Tracing {
			w.Notef("D%d: KV session %s not found (already decoded, released or expired)", r.D, Short(r.SessionID))
		}
	}
	w.send(msgReply, callReply{client: int32(r.h), rpc: r.rpc, result: r.Res}.event(evDecodeReplyArrive))
}

// decodeFetchDeadline: D's own deadline on the fetch passed: UNAVAILABLE
// (the KV transfer failed; the session is freed by P's TTL if nobody took it).
func (w *World) decodeFetchDeadline(ev Event) {
	r := w.Nodes.Reqs[kvFetchOf(ev).req-1]
	if r.Done {
		return
	}
	r.Done, r.Res = true, ResUnavailable
	if w.Tracing {
		w.Notef("D%d: fetch of KV session %s timed out", r.D, Short(r.SessionID))
	}
	w.send(msgReply, callReply{client: int32(r.h), rpc: r.rpc, result: ResUnavailable}.event(evDecodeReplyArrive))
}

// kvAbortArrive: Abort(kv_session) on P from a client.
func (w *World) kvAbortArrive(ev Event) {
	ab := kvAbortOf(ev)
	c := w.Cons[ab.prefill]
	if !c.Up {
		return
	}
	s := w.Nodes.byID[ab.session]
	res := resAlreadyFinished
	if s != nil && s.P == int(ab.prefill) && s.Live(w) {
		s.State = KvReleased
		s.Aborted++
		w.Nodes.Touched = append(w.Nodes.Touched, s)
		res = resAborted
	}
	if w.Tracing {
		w.Notef("P%d: Abort(kv_session %s): %s", ab.prefill, Short(ab.session), ResNames[res])
	}
	w.send(msgReply, callReply{client: ab.client, rpc: ab.rpc, result: res}.event(evKVAbortReplyArrive))
}

// kvExpire: a session's TTL on P passed; an unfetched one is freed.
func (w *World) kvExpire(ev Event) {
	s := w.Nodes.Sessions[kvExpireOf(ev).session-1]
	if s.Live(w) {
		s.State = kvExpired
		w.Nodes.Touched = append(w.Nodes.Touched, s)
		if w.Tracing {
			w.Notef("P%d: KV session %s expired unfetched", s.P, Short(s.Id))
		}
	}
}

// drainEPPD: P releases every session it holds; D starts its drain.
func (w *World) drainEPPD() {
	for p := range w.Cons {
		w.drainKVSessions(p)
	}
	for _, d := range w.Nodes.decoders {
		d.health.StartDrain()
	}
}

// drainKVSessions: P node p releases every KV session it still holds
// (S-2, S-4): the contract's drain, which the engine's P carries out over
// its own session table.
func (w *World) drainKVSessions(p int) {
	for _, s := range w.Nodes.Sessions {
		if s.P == p && s.Live(w) {
			s.State = kvDrained
			w.Nodes.Touched = append(w.Nodes.Touched, s)
			if w.Tracing {
				w.Notef("P%d: drain released KV session %s", p, Short(s.Id))
			}
		}
	}
}

var PrepNames = [...]string{PrepOK: "P's own", PrepMissing: "missing", PrepBadHash: "carrying a malformed hash"}
