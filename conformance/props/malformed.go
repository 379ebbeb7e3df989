package props

import (
	"bytes"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// corruption is one way the malformed action damages a reference.
type corruption struct {
	name string
	// codes are the answers a consume and an Abort may give (SU-4 first).
	codes []codes.Code
	apply func(t *rapid.T, ref *pb.EncoderCacheRef)
}

var corruptions = []corruption{
	{"truncated", []codes.Code{codes.InvalidArgument}, func(t *rapid.T, ref *pb.EncoderCacheRef) {
		n := rapid.IntRange(0, len(ref.OpaqueState)-1).Draw(t, "keep")
		ref.OpaqueState = ref.OpaqueState[:n]
	}},
	{"nul-byte", []codes.Code{codes.InvalidArgument}, func(t *rapid.T, ref *pb.EncoderCacheRef) {
		i := rapid.IntRange(0, len(ref.OpaqueState)-1).Draw(t, "at")
		ref.OpaqueState[i] = 0 // never valid anywhere in the reference's encoding
	}},
	{"trailing-garbage", []codes.Code{codes.InvalidArgument}, func(t *rapid.T, ref *pb.EncoderCacheRef) {
		ref.OpaqueState = append(ref.OpaqueState, 'x', 0)
	}},
	{"oversize", []codes.Code{codes.InvalidArgument}, func(t *rapid.T, ref *pb.EncoderCacheRef) {
		ref.OpaqueState = append(ref.OpaqueState, make([]byte, 65537)...) // L-1: over 64 KiB
	}},
	{"empty", []codes.Code{codes.InvalidArgument}, func(t *rapid.T, ref *pb.EncoderCacheRef) {
		ref.OpaqueState = nil
	}},
	{"foreign-backend", []codes.Code{codes.FailedPrecondition, codes.InvalidArgument}, func(t *rapid.T, ref *pb.EncoderCacheRef) {
		ref.Backend = "props-unknown-backend" // N-1 (or SU-4 if the backend is inside the tag)
	}},
}

// jsonCorruptions need the baton-json-v1 reference format
// (Profile.ReferenceFormat). They edit the reference's bytes in place:
// baton-json-v1 is byte-exact (a re-encoded document with its keys in
// another order is malformed, SU-4), so only an in-place edit keeps a
// reference well-formed and leaves its tag to reject it (SU-5) or its
// hash's form (H-3).
var jsonCorruptions = []corruption{
	{"tag-digit", []codes.Code{codes.InvalidArgument}, func(t *rapid.T, ref *pb.EncoderCacheRef) {
		tag := jsonStringValue(t, ref.OpaqueState, "tag")
		if tag.end == tag.start {
			t.Skip("no tag")
		}
		i := tag.start + rapid.IntRange(0, tag.end-tag.start-1).Draw(t, "digit")
		d := byte('0')
		if ref.OpaqueState[i] == '0' {
			d = '1'
		}
		ref.OpaqueState[i] = d // a well-formed reference with a wrong tag (SU-5)
	}},
	{"bad-hash", []codes.Code{codes.InvalidArgument}, func(t *rapid.T, ref *pb.EncoderCacheRef) {
		h := jsonStringValue(t, ref.OpaqueState, "hash")
		// H-3: a malformed hash from a peer, the rest of the bytes kept.
		ref.OpaqueState = append(append(append([]byte(nil), ref.OpaqueState[:h.start]...), "not-a-sha256"...), ref.OpaqueState[h.end:]...)
	}},
}

// span is a byte range [start, end) of an opaque state.
type span struct{ start, end int }

// jsonStringValue returns where the value of the first string member key
// ("key":"...") lies in opaque; it fails the check when there is none
// (the profile declares baton-json-v1, whose members are plain strings
// without escapes).
func jsonStringValue(t *rapid.T, opaque []byte, key string) span {
	marker := []byte(`"` + key + `":"`)
	i := bytes.Index(opaque, marker)
	if i < 0 {
		t.Fatalf("opaque_state has no %q member (the profile declares baton-json-v1): %.80q", key, opaque)
	}
	start := i + len(marker)
	n := bytes.IndexByte(opaque[start:], '"')
	if n < 0 {
		t.Fatalf("opaque_state's %q member is not terminated (the profile declares baton-json-v1): %.80q", key, opaque)
	}
	return span{start, start + n}
}

// malformed presents a corrupted copy of a reference to the consumer and
// to Abort: the answer codes of the corruption (SU-4, L-1, N-1), and the
// model stays as it was (the original still works, SU-4).
func (mc *machine) malformed(t *rapid.T) {
	r := mc.pick(t, "of", stateLive, stateConsumed, stateReleased)
	cs := corruptions
	if mc.profile.ReferenceFormat == target.ReferenceFormatBatonJSONv1 && rapid.Bool().Draw(t, "json") {
		cs = jsonCorruptions // well-formed but wrong: the rejections most likely to touch the entry
	}
	c := rapid.SampledFrom(cs).Draw(t, "corruption")
	bad := proto.Clone(r.ref).(*pb.EncoderCacheRef)
	if len(bad.OpaqueState) == 0 {
		t.SkipNow() // empty opaque state
	}
	c.apply(t, bad)
	mc.step(t, "malformed %s copy of %s (%s)", c.name, refLabel(r.ref), r.state)
	want := codeNames(c.codes)
	ctx, cancel := mc.ctx()
	defer cancel()
	if !mc.m.down["consumer"] {
		res := mc.generate(t, ctx, mc.cons, mc.consumeRequest(bad))
		if !containsCode(c.codes, res.Code()) || len(res.TokenIDs()) > 0 {
			t.Fatalf("%s = %s; want %s before any token (SU-4)", consumeCall(bad, c.name+" copy of a "+r.state.String()+" reference"), describe(res), want)
		}
	}
	if !mc.m.down["producer"] {
		_, err := mc.prod.Abort(ctx, abortRequest(bad))
		if !containsCode(c.codes, status.Code(err)) {
			t.Fatalf("%s = %s; want %s (SU-4: a malformed reference releases nothing)", abortCall(bad, c.name+" copy"), statusString(err), want)
		}
	}
	if r.state == stateLive && rapid.Bool().Draw(t, "then consume the original") {
		mc.consumeRef(t, r, "the original of a "+c.name+" copy, which must still work (SU-4)")
	}
}
