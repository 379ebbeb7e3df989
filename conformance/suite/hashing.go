package suite

import (
	"context"
	"fmt"
	"strings"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
)

// Identity and hashing cases (CONTRACT H-3, H-5).

// malformedHashes returns malformed versions of the valid content hash
// hash (64 lowercase hex): too short, too long, uppercase, non-hex. Not
// empty: an empty hash is a missing one (H-2, served with a fresh
// identity), which inside a tagged reference only the tag rejects (SU-5).
func malformedHashes(hash string) []struct{ name, hash string } {
	out := []struct{ name, hash string }{
		{`"zz"`, "zz"},
		{"63 hex digits", hash[:len(hash)-1]},
		{"65 hex digits", hash + "0"},
		{"64 non-hex characters", strings.Repeat("g", 64)},
		{"leading space", " " + hash[:len(hash)-1]},
	}
	if up := strings.ToUpper(hash); up != hash {
		out = append(out, struct{ name, hash string }{"uppercase hex", up})
	}
	return out
}

// H3MalformedHashRejected corrupts the content hash inside a valid reference (format declared): each INVALID_ARGUMENT before any token, and the valid reference still consumes (H-3).
func H3MalformedHashRejected(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)

	ready := h.publish(fixture(t, "video-001.jpeg"))
	ref := ready.GetRef()
	hash := ready.GetItems()[0].GetContentHash()
	if !contentHashPattern.MatchString(hash) {
		t.Fatalf("Publish = content hash %q; want 64 lowercase hex digits", hash)
	}
	for _, v := range malformedHashes(hash) {
		op, err := refWithItemHash(ref.GetOpaqueState(), 0, v.hash)
		if err != nil {
			t.Fatalf("Publish = reference %s: %v; the profile declares reference_format %q", refLabel(ref), err, FormatBatonJSONv1)
		}
		h.consumeRejected(prompt, withOpaque(ref, op), "items[0].hash "+v.name, codes.InvalidArgument)
	}
	h.consumeOK(prompt, ref, "the valid reference after the corrupted ones")
}

// H5UUIDIsNotContentHash sends two different images with one MediaItem.uuid: baseline answers equal those without uuid, producer hashes differ (and ignore the uuid), and E+PD answers differ and are each image's own baseline answer (H-5; usage is B-1's; a consumer that answers the two alike even without uuid is B-2's defect, and leaves H-5 not verifiable).
func H5UUIDIsNotContentHash(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	// Plain answers first: the pair must be images the baseline tells apart.
	a, b, baseA, baseB := h.distinctBaselines(prompt, fixturePairs(t, b2Pairs))
	uuid := newUUID()
	withUUID := func(img fixtures.Image) *pb.MediaItem {
		it := imageItem(img)
		it.Uuid = uuid
		return it
	}
	note := fmt.Sprintf(", uuid=%s", uuid)
	// A then B with one uuid: a cache keyed by uuid would serve B with A's answer.
	for _, run := range []struct {
		img  fixtures.Image
		want *target.GenerateResult
	}{{a, baseA}, {b, baseB}} {
		res := h.generate(h.base, h.baselineRequest(prompt, withUUID(run.img)))
		call := fmt.Sprintf("Baseline(image=%s%s, prompt=%q)", run.img.Name, note, prompt)
		if expectTokens(t, call, res) && !sameAnswer(res, run.want) {
			t.Errorf("%s = tokens %s; want the answer without uuid %s", call, tokensString(res.TokenIDs()), tokensString(run.want.TokenIDs()))
		}
	}

	// Without uuid the consumer must tell the two apart (B-2): otherwise
	// a uuid's part in a shared answer cannot be told.
	plainA, plainB := h.publish(a), h.publish(b)
	gotPlainA, okA := h.consumeOK(prompt, plainA.GetRef(), "image="+a.Name+" without uuid")
	gotPlainB, okB := h.consumeOK(prompt, plainB.GetRef(), "image="+b.Name+" without uuid")
	if !okA || !okB {
		return
	}
	if sameAnswer(gotPlainA, gotPlainB) {
		discovered(t, fmt.Sprintf("E+PD answers image=%s and image=%s alike even without uuid (%s), a B-2 defect: whether a uuid stands in for the content hash cannot be told", a.Name, b.Name, tokensString(gotPlainA.TokenIDs())))
	}

	readyA := h.publishItems(nil, "image="+a.Name+note, withUUID(a))
	readyB := h.publishItems(nil, "image="+b.Name+note, withUUID(b))
	hashA, hashB, hashPlain := readyA.GetItems()[0].GetContentHash(), readyB.GetItems()[0].GetContentHash(), plainA.GetItems()[0].GetContentHash()
	if hashA == hashB {
		t.Errorf("Publish(image=%s%s) and Publish(image=%s%s) = content hash %s for both; want each image's own hash", a.Name, note, b.Name, note, hashA)
	}
	if hashA != hashPlain {
		t.Errorf("Publish(image=%s%s) = content hash %s; want %s as without uuid (the hash is of pixels, not ids)", a.Name, note, hashA, hashPlain)
	}

	gotA, okA := h.consumeOK(prompt, readyA.GetRef(), "image="+a.Name+note)
	gotB, okB := h.consumeOK(prompt, readyB.GetRef(), "image="+b.Name+note)
	if !okA || !okB {
		return
	}
	if sameAnswer(gotA, gotB) {
		t.Errorf("E+PD(image=%s%s) = image=%s's tokens %s; want its own answer %s", b.Name, note, a.Name, tokensString(gotB.TokenIDs()), tokensString(baseB.TokenIDs()))
		return
	}
	expectSameAnswer(t, fmt.Sprintf("image=%s%s, prompt=%q", a.Name, note, prompt), gotA, baseA)
	expectSameAnswer(t, fmt.Sprintf("image=%s%s, prompt=%q", b.Name, note, prompt), gotB, baseB)
}
