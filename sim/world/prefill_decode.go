package world

import (
	"github.com/baton-dev/baton/engine/handoff"
)

// The state of the P and D nodes of E+P+D: KV sessions, decode
// requests, D nodes and the clients' decodes. What the nodes do with it
// is sim/nodes' prefill_decode.go.

// kvState is where a KV session stands on P.
type kvState uint8

const (
	KvLive     kvState = iota + 1
	KvFetched          // D fetched and released it (attached)
	KvReleased         // Abort(kv_session) from the client
	KvExpired          // its TTL passed unfetched
	KvDrained          // P's shutdown released it
)

var KvStateNames = [...]string{KvLive: "live", KvFetched: "attached", KvReleased: "released", KvExpired: "expired", KvDrained: "drained"}

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
	H       int
	Rpc     int64
	D       int
	Session *KvSession
	// SessionID is the KV session reference's id; entryRef any encoder
	// reference the request carries (always "": N-2, L-2).
	SessionID string
	entryRef  string
	Kind      PrepKind
	Prep      *DecodePrep
	// prep is where Prep may point (SetPrep: no allocation of its own).
	prep DecodePrep
	// Arrived: D received it; ran: D went past its checks (attached and
	// fetched); done: D answered.
	Arrived, Ran, Done bool
	Res                int64
}

// DecoderNode is a D node: its health (admission, drain) and the sessions
// it attached to (its replay guard).
type DecoderNode struct {
	Idx      int
	Health   *handoff.Health
	Attached map[string]bool
}

// ClientDecode is a client's E+P+D state after its PrefillReady.
type ClientDecode struct {
	Session *KvSession
	Prep    DecodePrep
	// Retried: a refused (L-2, H-3) request was sent again properly;
	// replayed: a decoded session was sent again (SiteDecodeReplay).
	Retried, Replayed bool
	Last              *DecodeReq
	// hash is where Prep.Hashes may point (NewClientDecode).
	hash [1]string
}

// SetPrep makes r carry a copy of p (r.Prep, in r's own memory).
func (r *DecodeReq) SetPrep(p DecodePrep) {
	r.prep = p
	r.Prep = &r.prep
}

// NewClientDecode returns a new client decode state for session s whose
// preparation names s and carries hash, its Prep.Hashes in the state's own
// memory (one allocation less a decode).
func NewClientDecode(s *KvSession, hash string) *ClientDecode {
	cd := &ClientDecode{Session: s}
	cd.hash[0] = hash
	cd.Prep = DecodePrep{SessionID: s.Id, Hashes: cd.hash[:]}
	return cd
}

// Client stages of E+P+D (client.go's stages end before these).
const (
	StageDecoding clientStage = 64 + iota
	StageKVAborting
)

// ResDecodeRefused is D's INVALID_ARGUMENT before execution (L-2, H-3, a
// session not found); resOf maps the core's rejections for the rest.
const ResDecodeRefused int64 = 64

func init() { ResNames[ResDecodeRefused] = "INVALID_ARGUMENT(decode)" }

// ContentHash is the content hash P puts in the decode preparation for
// entry's image: 64 lowercase hex digits derived from the entry id.
func ContentHash(entry string) string { return entry + entry }

var PrepNames = [...]string{PrepOK: "P's own", PrepMissing: "missing", PrepBadHash: "carrying a malformed hash"}
