package world

import (
	"strconv"

	"github.com/baton-dev/baton/engine/handoff"
)

// Named, typed payloads of the events. The queue keeps every event in one
// compact struct (queue.go's event, in the queue's slab) whose slots h, c,
// a, b, f and s mean different things for different kinds. Handlers and
// senders never touch those slots: each kind (or family of kinds) has a
// payload type here that names what it carries, a constructor (p.event)
// and an accessor (xOf). Only this file and queue.go read or write the
// slots (events_test.go checks it). The trace prints the slots as they are
// (appendSlots), so traces are what they were before the payloads had names.

// ClientCall: a client's call and its own timers. client is the handoff
// (client) index, rpc the client's call number (0: a racing call nobody
// waits for). Kinds: evClientStart (rpc 0), evClientDeadline,
// evClientCancel, evPublishArrive.
type ClientCall struct {
	Client int32
	Rpc    int64
}

func (p ClientCall) Event(k eventKind) Event { return Event{Kind: k, h: p.Client, a: p.Rpc} }

// ClientCallOf is ev's ClientCall.
func ClientCallOf(ev Event) ClientCall { return ClientCall{Client: ev.h, Rpc: ev.a} }

// setCaller stamps the request ev with the call that sends it (World.call):
// every request kind keeps its client in h and its call number in a.
func (ev *Event) setCaller(p ClientCall) { ev.h, ev.a = p.Client, p.Rpc }

// CallReply: an answer that carries only a result code. Kinds:
// EvPublishFailArrive, EvReleaseReplyArrive, evDecodeReplyArrive,
// evKVAbortReplyArrive.
type CallReply struct {
	Client int32
	Rpc    int64
	Result int64
}

func (p CallReply) Event(k eventKind) Event {
	return Event{Kind: k, h: p.Client, a: p.Rpc, b: p.Result}
}
func CallReplyOf(ev Event) CallReply { return CallReply{Client: ev.h, Rpc: ev.a, Result: ev.b} }

// ReadyReply is EvReadyArrive's payload: E's OK to a publish call
// (Client, Rpc) with the Entry it made and when that entry expires.
type ReadyReply struct {
	Client    int32
	Rpc       int64
	Entry     string
	ExpiresMs int64
}

// Event is p as an EvReadyArrive event.
func (p ReadyReply) Event() Event {
	return Event{Kind: EvReadyArrive, h: p.Client, a: p.Rpc, s: p.Entry, b: p.ExpiresMs}
}

// ReadyReplyOf is ev's ReadyReply.
func ReadyReplyOf(ev Event) ReadyReply {
	return ReadyReply{Client: ev.h, Rpc: ev.a, Entry: ev.s, ExpiresMs: ev.b}
}

// consumeRequest: a consume of entry sent to consumer (evConsumeArrive) or,
// by the wrong-role probe, to E (evProducerConsume). form is the form of
// the presented reference; waitingSince is 0, or (under the
// lock-across-transfer mutant) the tick the consume first arrived plus 1.
type consumeRequest struct {
	Client       int32   // the calling client's index
	Consumer     int32   // the consumer it is sent to (index)
	Rpc          int64   // the client's call number (0: a racing call)
	Entry        string  // the entry id of the presented reference
	Form         RefForm // the form of the presented reference
	WaitingSince int64   // 0, or the first arrival tick + 1 (lock-across-transfer mutant)
}

// Event is p as an event of kind k (EvConsumeArrive or EvProducerConsume).
func (p consumeRequest) Event(k eventKind) Event {
	return Event{Kind: k, h: p.Client, c: p.Consumer, a: p.Rpc, s: p.Entry, f: uint8(p.Form), b: p.WaitingSince}
}

// ConsumeRequestOf is ev's consumeRequest.
func ConsumeRequestOf(ev Event) consumeRequest {
	return consumeRequest{Client: ev.h, Consumer: ev.c, Rpc: ev.a, Entry: ev.s, Form: RefForm(ev.f), WaitingSince: ev.b}
}

// ConsumeReply: EvConsumeReplyArrive, the answer to a consume from
// consumer (-1: E answered, the L-4 mutant).
type ConsumeReply struct {
	Client   int32
	Consumer int32
	Rpc      int64
	Entry    string
	Result   int64
}

// Event is p as an EvConsumeReplyArrive event.
func (p ConsumeReply) Event() Event {
	return Event{Kind: EvConsumeReplyArrive, h: p.Client, c: p.Consumer, a: p.Rpc, s: p.Entry, b: p.Result}
}

// ConsumeReplyOf is ev's ConsumeReply.
func ConsumeReplyOf(ev Event) ConsumeReply {
	return ConsumeReply{Client: ev.h, Consumer: ev.c, Rpc: ev.a, Entry: ev.s, Result: ev.b}
}

// releaseRequest: evReleaseArrive, an Abort of entry.
type releaseRequest struct {
	Client int32  // the releasing client's index
	Rpc    int64  // its call number (0: a racing call nobody waits for)
	Entry  string // the entry to release
}

func (p releaseRequest) event() Event {
	return Event{Kind: EvReleaseArrive, h: p.Client, a: p.Rpc, s: p.Entry}
}

// ReleaseRequestOf is ev's releaseRequest.
func ReleaseRequestOf(ev Event) releaseRequest {
	return releaseRequest{Client: ev.h, Rpc: ev.a, Entry: ev.s}
}

// EncodeDone is evEncodeDone's payload: the encoder finished Entry for the
// publish call (Client, Rpc); Resumed marks the second one of a slow write
// (the fsync returned, sim/nodes' fsync.go), and then StartedMs is the tick
// the write began.
type EncodeDone struct {
	Client    int32
	Rpc       int64
	Entry     string
	Resumed   bool
	StartedMs int64
}

// encodeResumed is the slot value that marks a resumed encodeDone.
const encodeResumed int32 = 1

// Event is p as an EvEncodeDone event.
func (p EncodeDone) Event() Event {
	ev := Event{Kind: EvEncodeDone, h: p.Client, a: p.Rpc, s: p.Entry, b: p.StartedMs}
	if p.Resumed {
		ev.c = encodeResumed
	}
	return ev
}
func EncodeDoneOf(ev Event) EncodeDone {
	return EncodeDone{Client: ev.h, Rpc: ev.a, Entry: ev.s, Resumed: ev.c == encodeResumed, StartedMs: ev.b}
}

// RemoveDone: evRemoveDone, the removal of entry finished; client and rpc
// name the release call that asked for it (client < 0: none).
type RemoveDone struct {
	Client int32                // the client of the release call (< 0: none)
	Rpc    int64                // that call's number
	Cause  handoff.RemovalCause // why the entry was removed
	Entry  string
}

// Event is p as an EvRemoveDone event.
func (p RemoveDone) Event() Event {
	return Event{Kind: EvRemoveDone, h: p.Client, a: p.Rpc, b: int64(p.Cause), s: p.Entry}
}

// RemoveDoneOf is ev's RemoveDone.
func RemoveDoneOf(ev Event) RemoveDone {
	return RemoveDone{Client: ev.h, Rpc: ev.a, Cause: handoff.RemovalCause(ev.b), Entry: ev.s}
}

// RecvTimer: a timer of consumer's receive recv, valid while the consumer
// is still in incarnation inc. Kinds: evClaimRead, evTransferTimeout.
type RecvTimer struct {
	Consumer int32 // the consumer (index)
	Recv     int64 // its receive's number
	Inc      int64 // the consumer's incarnation when it was set
}

// Event is p as an event of kind k (EvClaimRead or EvTransferTimeout).
func (p RecvTimer) Event(k eventKind) Event {
	return Event{Kind: k, c: p.Consumer, a: p.Recv, b: p.Inc}
}

// RecvTimerOf is ev's RecvTimer.
func RecvTimerOf(ev Event) RecvTimer { return RecvTimer{Consumer: ev.c, Recv: ev.a, Inc: ev.b} }

// TransferRequest: evTransferArrive, consumer's transfer request number
// recv (the receive's number) for entry, arriving at E.
type TransferRequest struct {
	Consumer int32  // the requesting consumer (index)
	Recv     int64  // the receive's number (index into World.Xreqs + 1)
	Entry    string // the entry asked
}

// Event is p as an EvTransferArrive event.
func (p TransferRequest) Event() Event {
	return Event{Kind: EvTransferArrive, c: p.Consumer, a: p.Recv, s: p.Entry}
}

// TransferRequestOf is ev's TransferRequest.
func TransferRequestOf(ev Event) TransferRequest {
	return TransferRequest{Consumer: ev.c, Recv: ev.a, Entry: ev.s}
}

// TransferReply: evTransferReply, E's answer result to consumer's
// transfer request recv.
type TransferReply struct {
	Consumer int32 // the consumer answered (index)
	Recv     int64 // its receive's number
	Result   int64 // the answer (a Res code)
}

// Event is p as an EvTransferReply event.
func (p TransferReply) Event() Event {
	return Event{Kind: EvTransferReply, c: p.Consumer, a: p.Recv, b: p.Result}
}

// TransferReplyOf is ev's TransferReply.
func TransferReplyOf(ev Event) TransferReply {
	return TransferReply{Consumer: ev.c, Recv: ev.a, Result: ev.b}
}

// setTransferResult changes the result of the transfer reply ev in place
// (a fault or a directed plan replaces it).
func (ev *Event) setTransferResult(result int64) { ev.b = result }

// WriteStep: a step of WRITE number write (1-based). Kinds: evWriteLand,
// evWriteComplete, evWriteDeadline.
type WriteStep struct{ Write int64 }

func (p WriteStep) Event(k eventKind) Event { return Event{Kind: k, a: p.Write} }
func WriteStepOf(ev Event) WriteStep        { return WriteStep{Write: ev.a} }

// ConsumerStep: something that happens to consumer (a node), in
// incarnation inc where it matters. Kinds: EvChaos, EvCrash, EvRestart
// (inc: the incarnation that crashed), evPartitionTick.
type ConsumerStep struct {
	Consumer int32
	Inc      int64
}

func (p ConsumerStep) Event(k eventKind) Event { return Event{Kind: k, c: p.Consumer, a: p.Inc} }
func ConsumerStepOf(ev Event) ConsumerStep {
	return ConsumerStep{Consumer: ev.c, Inc: ev.a}
}

// shutdownCall: evShutdown; injected marks the fault-injected Shutdown,
// which first tries the two wrong ids.
type shutdownCall struct{ Injected bool }

func (p shutdownCall) event() Event {
	ev := Event{Kind: EvShutdown}
	if p.Injected {
		ev.a = 1
	}
	return ev
}
func ShutdownCallOf(ev Event) shutdownCall { return shutdownCall{Injected: ev.a == 1} }

// ProducerCrash is evProducerCrash's payload: SlowWrite names the slow
// write it interrupts ("" for none).
type ProducerCrash struct{ SlowWrite string }

// Event is p as an EvProducerCrash event.
func (p ProducerCrash) Event() Event { return Event{Kind: EvProducerCrash, s: p.SlowWrite} }
func ProducerCrashOf(ev Event) ProducerCrash {
	return ProducerCrash{SlowWrite: ev.s}
}

// KvExpire: EvKVExpire, the TTL of prefill node P's KV session number session.
type KvExpire struct {
	Prefill int32
	Session int64
}

func (p KvExpire) Event() Event { return Event{Kind: EvKVExpire, c: p.Prefill, a: p.Session} }
func KvExpireOf(ev Event) KvExpire {
	return KvExpire{Prefill: ev.c, Session: ev.a}
}

// DecodeRequest: evDecodeArrive, the client's decode call rpc to decoder
// D, decode request number req.
type DecodeRequest struct {
	Client  int32
	Decoder int32
	Rpc     int64
	Req     int64
}

func (p DecodeRequest) Event() Event {
	return Event{Kind: EvDecodeArrive, h: p.Client, c: p.Decoder, a: p.Rpc, b: p.Req}
}
func DecodeRequestOf(ev Event) DecodeRequest {
	return DecodeRequest{Client: ev.h, Decoder: ev.c, Rpc: ev.a, Req: ev.b}
}

// KvFetch: a step of decode request req's KV fetch at node (P for
// evKVFetchArrive; D for evKVFetchReply, with P's result, and for
// evDecodeFetchDeadline).
type KvFetch struct {
	Node   int32
	Req    int64
	Result int64
}

func (p KvFetch) Event(k eventKind) Event { return Event{Kind: k, c: p.Node, a: p.Req, b: p.Result} }
func KvFetchOf(ev Event) KvFetch          { return KvFetch{Node: ev.c, Req: ev.a, Result: ev.b} }

// KvAbort: EvKVAbortArrive, the client's Abort(kv_session) call rpc to
// prefill node P for session.
type KvAbort struct {
	Client  int32
	Prefill int32
	Rpc     int64
	Session string
}

func (p KvAbort) Event() Event {
	return Event{Kind: EvKVAbortArrive, h: p.Client, c: p.Prefill, a: p.Rpc, s: p.Session}
}
func KvAbortOf(ev Event) KvAbort {
	return KvAbort{Client: ev.h, Prefill: ev.c, Rpc: ev.a, Session: ev.s}
}

// appendSlots appends the trace's view of ev's slots (trace.go): the raw
// h, c, a, b, f and s, whatever the kind, so the trace stays as it was.
func (ev *Event) appendSlots(b []byte) []byte {
	b = append(b, `,"h":`...)
	b = strconv.AppendInt(b, int64(ev.h), 10)
	b = append(b, `,"c":`...)
	b = strconv.AppendInt(b, int64(ev.c), 10)
	b = append(b, `,"a":`...)
	b = strconv.AppendInt(b, ev.a, 10)
	b = append(b, `,"b":`...)
	b = strconv.AppendInt(b, ev.b, 10)
	if ev.f != 0 {
		b = append(b, `,"f":`...)
		b = strconv.AppendInt(b, int64(ev.f), 10)
	}
	if ev.s != "" {
		b = append(b, `,"s":`...)
		b = strconv.AppendQuote(b, ev.s)
	}
	return b
}

// verboseSlots are the h and c slots the -v status line prints.
func (ev *Event) verboseSlots() (h, c int32) { return ev.h, ev.c }

// requestEntryOf is the entry named by a request World.call sends (a
// consume's or a release's; "" for a publish).
func requestEntryOf(ev Event) string { return ev.s }

// dropSlots are the c and a slots a scenario's drop-reply line prints
// (scenario.go), whatever the kind.
func (ev *Event) dropSlots() (c int32, a int64) { return ev.c, ev.a }

// TransferLink is the consumer at the other end of E's link a transfer
// request or reply travels (evTransferArrive, evTransferReply).
func TransferLink(ev Event) int32 { return ev.c }
