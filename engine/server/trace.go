package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// W3C Trace Context (https://www.w3.org/TR/trace-context/) carried in gRPC
// metadata: a request that enters the engine with `traceparent` keeps its
// trace id in the engine's logs (trace_id), and every call the engine makes
// on its behalf (a consumer's TransferEncoderCache to the producer) carries
// it on, with the engine's own span as the parent.
const (
	// TraceparentKey is the metadata key of the W3C traceparent header.
	TraceparentKey = "traceparent"
	// TracestateKey is the metadata key of the W3C tracestate header,
	// forwarded unchanged.
	TracestateKey = "tracestate"
)

// ErrBadTraceparent is wrapped by ParseTraceparent's errors. The engine
// treats a malformed incoming traceparent as absent (it starts a new trace),
// as the W3C specification says; it never rejects the request for it.
var ErrBadTraceparent = errors.New("server: malformed traceparent")

// TraceContext is one position in a W3C trace: the trace, the span of
// whoever holds it (SpanID: the parent-id of the calls it makes), the span
// that called it (ParentID, zero when the trace started here), the
// trace-flags (bit 0: sampled) and the opaque tracestate.
type TraceContext struct {
	// TraceID is the W3C trace-id (16 bytes, all zero is invalid).
	TraceID [16]byte
	// SpanID is the holder's span (8 bytes): the parent-id of the calls it
	// makes.
	SpanID [8]byte
	// ParentID is the span that called the holder; zero when the trace
	// started here.
	ParentID [8]byte
	// Flags is the W3C trace-flags byte (bit 0: sampled).
	Flags byte
	// State is the opaque W3C tracestate (bounded by parseTracestate:
	// MaxTracestateBytes, MaxTracestateMembers; "" when absent or refused),
	// forwarded on outgoing calls.
	State string
}

// Valid reports whether the trace and span ids are non-zero.
func (tc TraceContext) Valid() bool {
	return tc.TraceID != [16]byte{} && tc.SpanID != [8]byte{}
}

// TraceIDString is the trace id as 32 lowercase hex digits (the log's trace_id).
func (tc TraceContext) TraceIDString() string { return hex.EncodeToString(tc.TraceID[:]) }

// SpanIDString is the span id as 16 lowercase hex digits (the log's span_id).
func (tc TraceContext) SpanIDString() string { return hex.EncodeToString(tc.SpanID[:]) }

// Traceparent formats the header a call made from this span carries:
// "00-<trace id>-<span id>-<flags>" (55 characters).
func (tc TraceContext) Traceparent() string {
	return fmt.Sprintf("00-%x-%x-%02x", tc.TraceID[:], tc.SpanID[:], tc.Flags)
}

// ParseTraceparent reads a traceparent header (W3C level 1). The result's
// SpanID is the header's parent-id: the sender's span. Errors wrap
// ErrBadTraceparent: wrong length or separators, upper-case or non-hex
// digits, version ff, an all-zero trace id or parent id, or a version-00
// header with trailing data.
func ParseTraceparent(h string) (TraceContext, error) {
	var tc TraceContext
	bad := func(why string) (TraceContext, error) {
		return TraceContext{}, fmt.Errorf("%w: %s (%.80q)", ErrBadTraceparent, why, h)
	}
	if len(h) < 55 {
		return bad("shorter than 55 characters")
	}
	if h[2] != '-' || h[35] != '-' || h[52] != '-' {
		return bad("separators not at 2, 35, 52")
	}
	var version [1]byte
	if !lowerHex(h[0:2], version[:]) || version[0] == 0xff {
		return bad("bad version")
	}
	if version[0] == 0 && len(h) != 55 {
		return bad("version 00 with trailing data")
	}
	if len(h) > 55 && h[55] != '-' {
		return bad("future version without a separator after flags")
	}
	if !lowerHex(h[3:35], tc.TraceID[:]) || tc.TraceID == [16]byte{} {
		return bad("bad trace id")
	}
	if !lowerHex(h[36:52], tc.SpanID[:]) || tc.SpanID == [8]byte{} {
		return bad("bad parent id")
	}
	var flags [1]byte
	if !lowerHex(h[53:55], flags[:]) {
		return bad("bad flags")
	}
	tc.Flags = flags[0]
	return tc, nil
}

// lowerHex decodes s (lowercase hex only) into dst, which must be len(s)/2 long.
func lowerHex(s string, dst []byte) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	n, err := hex.Decode(dst, []byte(s))
	return err == nil && n == len(dst)
}

// childSpan is the span this engine opens for a request that arrived with
// incoming (from ParseTraceparent): same trace, flags and state, a new span
// id, the sender's span as parent. With no valid incoming context it starts
// a new, unsampled trace.
func childSpan(incoming TraceContext, ok bool) TraceContext {
	var tc TraceContext
	if ok && incoming.Valid() {
		tc = TraceContext{TraceID: incoming.TraceID, ParentID: incoming.SpanID, Flags: incoming.Flags, State: incoming.State}
	} else {
		randomNonZero(tc.TraceID[:])
	}
	randomNonZero(tc.SpanID[:])
	return tc
}

func randomNonZero(b []byte) {
	for {
		if _, err := rand.Read(b); err != nil {
			panic(err)
		}
		for _, x := range b {
			if x != 0 {
				return
			}
		}
	}
}

// incomingTrace reads traceparent and tracestate from incoming gRPC
// metadata and opens this engine's span (childSpan).
func incomingTrace(ctx context.Context) TraceContext {
	md, _ := metadata.FromIncomingContext(ctx)
	var (
		in TraceContext
		ok bool
	)
	if v := md.Get(TraceparentKey); len(v) == 1 {
		parsed, err := ParseTraceparent(v[0])
		if err == nil {
			in, ok = parsed, true
			in.State = parseTracestate(md.Get(TracestateKey))
		}
	}
	return childSpan(in, ok)
}

type traceKey struct{}

// ContextWithTrace returns ctx carrying tc (TraceFromContext, OutgoingTraceContext).
func ContextWithTrace(ctx context.Context, tc TraceContext) context.Context {
	return context.WithValue(ctx, traceKey{}, tc)
}

// TraceFromContext returns the trace context the engine's interceptor put in
// a request's context, or false outside a request.
func TraceFromContext(ctx context.Context) (TraceContext, bool) {
	tc, ok := ctx.Value(traceKey{}).(TraceContext)
	return tc, ok && tc.Valid()
}

// OutgoingTraceContext returns ctx with the request's trace context set as
// outgoing gRPC metadata (traceparent = this engine's span, tracestate
// unchanged), replacing any traceparent already there, so a call the engine
// makes on a request's behalf (TransferEncoderCache from consumer to
// producer) joins the caller's trace. Without a trace context it returns ctx.
func OutgoingTraceContext(ctx context.Context) context.Context {
	tc, ok := TraceFromContext(ctx)
	if !ok {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	md.Set(TraceparentKey, tc.Traceparent())
	if tc.State != "" {
		md.Set(TracestateKey, tc.State)
	} else {
		md.Delete(TracestateKey)
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// TraceUnaryClientInterceptor applies OutgoingTraceContext to every unary
// call of a client connection (grpc.WithChainUnaryInterceptor).
func TraceUnaryClientInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(OutgoingTraceContext(ctx), method, req, reply, cc, opts...)
}

// TraceStreamClientInterceptor applies OutgoingTraceContext to every
// streaming call of a client connection (grpc.WithChainStreamInterceptor).
func TraceStreamClientInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(OutgoingTraceContext(ctx), desc, cc, method, opts...)
}

// MaxTracestateBytes bounds the tracestate the engine keeps and forwards
// (W3C trace-context level 1 section 3.3.1.5: vendors should propagate at
// least 512 characters; more is dropped, never forwarded, attack A2).
const MaxTracestateBytes = 512

// MaxTracestateMembers bounds the list members of a tracestate (W3C
// trace-context level 1 section 3.3.1.1: at most 32).
const MaxTracestateMembers = 32

// parseTracestate returns the tracestate header the engine keeps and
// forwards on a request's behalf: the received values joined with ","
// (several headers are one list, W3C section 3.3.1), when the result is at
// most MaxTracestateBytes of at most MaxTracestateMembers well-formed list
// members with distinct keys; "" otherwise. A client's tracestate is
// forwarded to the producer in the consumer's TransferEncoderCache call,
// so an unbounded one could make that call's header list larger than the
// producer accepts: the producer's transport resets the stream, an
// uncertain outcome and a quarantine caused by a client (attack A2).
func parseTracestate(values []string) string {
	if len(values) == 0 {
		return ""
	}
	n := len(values) - 1
	for _, v := range values {
		n += len(v)
		if n > MaxTracestateBytes {
			return ""
		}
	}
	list := strings.Join(values, ",")
	members := 0
	keys := make([]string, 0, 4)
	for _, m := range strings.Split(list, ",") {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue // empty and whitespace-only members are allowed
		}
		key, value, ok := strings.Cut(m, "=")
		if !ok || !tracestateKey(key) || !tracestateValue(value) || slices.Contains(keys, key) {
			return ""
		}
		keys = append(keys, key)
		members++
		if members > MaxTracestateMembers {
			return ""
		}
	}
	if members == 0 {
		return ""
	}
	return list
}

// tracestateKey reports whether k is a W3C tracestate key: a simple key
// (lcalpha, then up to 255 of lcalpha, DIGIT, "_", "-", "*", "/") or a
// multi-tenant key tenant@system (tenant: lcalpha or DIGIT, then up to 240
// of those; system: lcalpha, then up to 13).
func tracestateKey(k string) bool {
	keyChar := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*' || c == '/'
	}
	part := func(s string, firstDigit bool, max int) bool {
		if s == "" || len(s) > max {
			return false
		}
		if c := s[0]; !(c >= 'a' && c <= 'z' || firstDigit && c >= '0' && c <= '9') {
			return false
		}
		for i := 1; i < len(s); i++ {
			if !keyChar(s[i]) {
				return false
			}
		}
		return true
	}
	if tenant, system, multi := strings.Cut(k, "@"); multi {
		return part(tenant, true, 241) && part(system, false, 14)
	}
	return part(k, false, 256)
}

// tracestateValue reports whether v is a W3C tracestate value: 1..256
// printable ASCII characters other than "," and "=", spaces allowed
// except at the end.
func tracestateValue(v string) bool {
	if v == "" || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}
