package suite

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Tamper evidence without a declared reference format (CONTRACT SU-5: "an
// integrity tag keyed per producer instance covers every other byte of the
// reference (backend, producer_instance_id, producer_endpoint, and the
// opaque_state outside the tag), so an altered one, a well-formed one
// included, consumes nothing"). The alterations below need no knowledge of
// the format, so SU-5 is verifiable for an engine with its own.

// tamperEveryByteMax is the longest opaque_state whose every byte the case
// alters, one reference per position; a longer one gets a dense
// deterministic sample of tamperEveryByteMax positions (tamperPositions).
// baton-json-v1 references of one item are about 230 bytes, so the
// reference engine's get every position; 1024 keeps the case under a
// second against a longer format (each alteration is one rejected consume
// and one rejected Abort, about 1 ms each over loopback).
const tamperEveryByteMax = 1024

// tamperPositions returns the positions of an opaque_state of n bytes the
// case alters: every position when n <= tamperEveryByteMax; otherwise the
// first and last tamperEveryByteMax/4 (where headers, ids and tags sit in
// most formats) and tamperEveryByteMax/2 positions evenly spaced between,
// sorted and without repeats.
func tamperPositions(n int) []int {
	if n <= tamperEveryByteMax {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	seen := map[int]bool{}
	edge, middle := tamperEveryByteMax/4, tamperEveryByteMax/2
	for i := 0; i < edge; i++ {
		seen[i], seen[n-1-i] = true, true
	}
	for k := 0; k < middle; k++ {
		seen[edge+k*(n-2*edge)/middle] = true
	}
	out := make([]int, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// alterByte returns a byte other than b of the same character class where
// there is one, so a textual reference stays well-formed: a digit becomes
// the next digit, a hex letter a-f the next hex letter, another letter the
// next letter of its case; any other byte has its lowest bit flipped.
func alterByte(b byte) byte {
	switch {
	case b >= '0' && b <= '9':
		return '0' + (b-'0'+1)%10
	case b >= 'a' && b <= 'f':
		return 'a' + (b-'a'+1)%6
	case b >= 'g' && b <= 'z':
		return 'g' + (b-'g'+1)%20
	case b >= 'A' && b <= 'Z':
		return 'A' + (b-'A'+1)%26
	}
	return b ^ 0x01
}

// truncationLengths returns the lengths shorter than n the case truncates
// an opaque_state of n bytes to, one per length class: 0..16, every power
// of two, n/4, n/2, 3n/4, and n-1..n-16; sorted, without repeats.
func truncationLengths(n int) []int {
	seen := map[int]bool{}
	add := func(l int) {
		if l >= 0 && l < n {
			seen[l] = true
		}
	}
	for l := 0; l <= 16; l++ {
		add(l)
		add(n - 1 - l)
	}
	for l := 32; l < n; l *= 2 {
		add(l)
	}
	add(n / 4)
	add(n / 2)
	add(3 * n / 4)
	out := make([]int, 0, len(seen))
	for l := range seen {
		out = append(out, l)
	}
	sort.Ints(out)
	return out
}

// tamperedVariant is one alteration of a valid reference; codes lists the
// codes it may get: INVALID_ARGUMENT (SU-5), or FAILED_PRECONDITION too
// when the backend or endpoint changed (N-1, SE-3 decide before SU-5).
// abortOnly marks an altered producer_endpoint of a transfer-backend
// reference: a consumer dials that endpoint, so refusing it before any
// connection is SE-3's check (its own cases); the producer's Abort, which
// dials nothing, still gets it.
type tamperedVariant struct {
	note      string
	ref       *pb.EncoderCacheRef
	codes     []codes.Code
	abortOnly bool
}

// tamperedReferences returns the alterations of ref the SU-5 case
// presents: every byte of opaque_state altered (alterByte; at
// tamperPositions), opaque_state truncated at every length class
// (truncationLengths) and extended after its end (one byte, many bytes, a
// JSON-looking suffix), producer_instance_id altered in each character and
// replaced, backend altered, and producer_endpoint altered (host, port,
// protocol, removed; abortOnly unless the backend is the shared directory,
// whose consumer dials nothing). None grows opaque_state past 65,536 bytes
// (that is L-1's).
func tamperedReferences(ref *pb.EncoderCacheRef) []tamperedVariant {
	op := ref.GetOpaqueState()
	invalid := []codes.Code{codes.InvalidArgument}
	refused := []codes.Code{codes.InvalidArgument, codes.FailedPrecondition}
	var out []tamperedVariant
	for _, i := range tamperPositions(len(op)) {
		b := append([]byte(nil), op...)
		b[i] = alterByte(b[i])
		out = append(out, tamperedVariant{fmt.Sprintf("opaque_state byte %d of %d altered (%q -> %q)", i, len(op), op[i], b[i]), withOpaque(ref, b), invalid, false})
	}
	for _, l := range truncationLengths(len(op)) {
		out = append(out, tamperedVariant{fmt.Sprintf("opaque_state truncated to %d of %d bytes", l, len(op)), withOpaque(ref, append([]byte(nil), op[:l]...)), invalid, false})
	}
	for _, suffix := range []struct{ note, bytes string }{
		{"one NUL byte", "\x00"}, {"one space", " "}, {"one newline", "\n"}, {"one 'a'", "a"}, {"one '}'", "}"},
		{"64 'a' bytes", string(pseudoASCII(64))}, {"4096 pseudo-random bytes", string(pseudoBytes("SU-5 extension", 4096))},
		{`JSON-looking ,"x":1}`, `,"x":1}`}, {"JSON-looking {}", "{}"}, {`JSON-looking {"v":1}`, `{"v":1}`},
	} {
		if len(op)+len(suffix.bytes) > maxReferenceBytes {
			continue
		}
		out = append(out, tamperedVariant{"opaque_state extended by " + suffix.note, withOpaque(ref, append(append([]byte(nil), op...), suffix.bytes...)), invalid, false})
	}
	id := ref.GetProducerInstanceId()
	for i := 0; i < len(id); i++ {
		b := []byte(id)
		b[i] = alterByte(b[i])
		out = append(out, tamperedVariant{fmt.Sprintf("producer_instance_id character %d altered (%q)", i, string(b)), withInstance(ref, string(b)), invalid, false})
	}
	other := newUUID()
	for other == id {
		other = newUUID()
	}
	out = append(out,
		tamperedVariant{fmt.Sprintf("producer_instance_id replaced by %q", other), withInstance(ref, other), invalid, false},
		tamperedVariant{"producer_instance_id with a character appended", withInstance(ref, id+"0"), invalid, false},
	)
	if bk := ref.GetBackend(); bk != "" {
		b := []byte(bk)
		b[0] = alterByte(b[0])
		r := proto.Clone(ref).(*pb.EncoderCacheRef)
		r.Backend = string(b)
		out = append(out, tamperedVariant{fmt.Sprintf("backend %q altered to %q", bk, r.Backend), r, refused, false})
	}
	ep := ref.GetProducerEndpoint()
	endpoint := func(note string, f func(e *pb.KvEndpoint) *pb.KvEndpoint) {
		r := proto.Clone(ref).(*pb.EncoderCacheRef)
		r.ProducerEndpoint = f(proto.Clone(ep).(*pb.KvEndpoint))
		out = append(out, tamperedVariant{"producer_endpoint " + note, r, refused, ref.GetBackend() != sharedDirBackend})
	}
	// Only loopback addresses: a broken engine that dials them reaches
	// nothing (port 9 is discard, closed on test machines) and never hangs.
	if ep != nil {
		endpoint(fmt.Sprintf("port %d altered to %d", ep.GetPort(), ep.GetPort()+1), func(e *pb.KvEndpoint) *pb.KvEndpoint { e.Port++; return e })
		endpoint(fmt.Sprintf("host %q altered to 127.0.0.2", ep.GetHost()), func(e *pb.KvEndpoint) *pb.KvEndpoint { e.Host = "127.0.0.2"; return e })
		endpoint(fmt.Sprintf("protocol %q altered", ep.GetProtocol()), func(e *pb.KvEndpoint) *pb.KvEndpoint { e.Protocol += "x"; return e })
		endpoint("removed", func(*pb.KvEndpoint) *pb.KvEndpoint { return nil })
	} else {
		endpoint("added (127.0.0.1:9)", func(*pb.KvEndpoint) *pb.KvEndpoint {
			return &pb.KvEndpoint{Host: "127.0.0.1", Port: 9, Protocol: "grpc"}
		})
	}
	return out
}

// withInstance returns a copy of ref naming producer instance id.
func withInstance(ref *pb.EncoderCacheRef, id string) *pb.EncoderCacheRef {
	c := proto.Clone(ref).(*pb.EncoderCacheRef)
	c.ProducerInstanceId = id
	return c
}

// pseudoASCII returns n deterministic lowercase letters.
func pseudoASCII(n int) []byte {
	b := pseudoBytes("SU-5 ascii", n)
	for i := range b {
		b[i] = 'a' + b[i]%26
	}
	return b
}

// codesString spells a set of codes for messages ("INVALID_ARGUMENT or FAILED_PRECONDITION").
func codesString(cs []codes.Code) string {
	s := ""
	for i, c := range cs {
		if i > 0 {
			s += " or "
		}
		s += codeName(c)
	}
	return s
}

// SU5TamperedReferencesRejected presents a fresh reference altered in every byte of its opaque_state (all positions up to 1024 bytes, a dense deterministic sample beyond), truncated at every length class, extended after its end, and with its producer_instance_id, backend and producer_endpoint altered, to the consumer and to the producer's Abort: each INVALID_ARGUMENT (FAILED_PRECONDITION allowed where the backend or endpoint changed: N-1, SE-3) with no token, and the original still consumes at the end (SU-5, any reference format). On a transfer backend an altered endpoint goes to the Abort only: the consumer would dial it, and refusing that before any connection is SE-3's.
func SU5TamperedReferencesRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ref := h.publish(fixture(t, "video-001.jpeg")).GetRef()
	variants := tamperedReferences(ref)
	failures := 0
	report := func(format string, args ...any) {
		failures++
		if failures <= tamperReportMax {
			t.Errorf(format, args...)
		}
	}
	su4s := 0
	for _, v := range variants {
		// An alteration that breaks the declared format gets SU-4's code
		// (precedence SU-4 before SU-5): here only "consumes and releases
		// nothing" is SU-5's to assert (codeIsSU4s).
		su4 := h.codeIsSU4s(v.ref.GetOpaqueState())
		if !v.abortOnly {
			res := h.consume(prompt, v.ref)
			switch {
			case res.Code() == codes.OK || len(res.TokenIDs()) > 0 || res.EncoderReady() != nil || hasPrefillReady(res):
				report("%s = %s; want %s before any token (SU-5: an altered reference consumes nothing)", consumeCall(ref, v.note), describe(res), codesString(v.codes))
			case slices.Contains(v.codes, res.Code()):
			case su4:
				su4s++
			default:
				report("%s = %s; want %s before any token (SU-5: an altered reference consumes nothing)", consumeCall(ref, v.note), describe(res), codesString(v.codes))
			}
		}
		st, err := h.abort(h.prod, v.ref)
		switch {
		case err == nil:
			report("%s = %s; want %s (an altered reference releases nothing)", abortCall(ref, v.note), abortAnswer(st, err), codesString(v.codes))
		case slices.Contains(v.codes, status.Code(err)):
		case su4:
			su4s++
		default:
			report("%s = %s; want %s (an altered reference releases nothing)", abortCall(ref, v.note), abortAnswer(st, err), codesString(v.codes))
		}
	}
	if su4s > 0 {
		t.Logf("%d answers to alterations that break the declared %s format were rejections with another code than INVALID_ARGUMENT: SU-4's to judge", su4s, FormatBatonJSONv1)
	}
	if failures > tamperReportMax {
		t.Errorf("... and %d more altered references accepted or answered with another code (of %d alterations, each consumed and aborted)", failures-tamperReportMax, len(variants))
	}
	t.Logf("SU-5 presented %d alterations of a %d-byte reference (%s)", len(variants), len(ref.GetOpaqueState()), strconv.Quote(refLabel(ref)))
	h.consumeOK(prompt, ref, fmt.Sprintf("the original after %d altered copies", len(variants)))
}

// tamperReportMax bounds the failure messages of the SU-5 tamper case; the
// rest are counted in one line.
const tamperReportMax = 10
