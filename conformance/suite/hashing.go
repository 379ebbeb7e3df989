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
// hash (64 lowercase hex): too short, too long, uppercase, non-hex, empty.
func malformedHashes(hash string) []struct{ name, hash string } {
	out := []struct{ name, hash string }{
		{`"zz"`, "zz"},
		{"63 hex digits", hash[:len(hash)-1]},
		{"65 hex digits", hash + "0"},
		{"empty", ""},
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
	h.needFormat("corrupting the content hash inside a reference")
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

// H5UUIDIsNotContentHash sends two different images with one MediaItem.uuid: baseline answers equal those without uuid and differ, producer hashes differ (and ignore the uuid), and E+PD answers differ and match their baselines (H-5).
func H5UUIDIsNotContentHash(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	h.needBaseline()
	defer h.cleanup()
	prompt := promptText(t, promptMarker)
	a, b := fixture(t, "video-001.png"), fixture(t, "triangle-001.gif")
	uuid := newUUID()
	withUUID := func(img fixtures.Image) *pb.MediaItem {
		it := imageItem(img)
		it.Uuid = uuid
		return it
	}
	baseline := func(img fixtures.Image, item *pb.MediaItem, note string) (*target.GenerateResult, bool) {
		res := h.generate(h.base, h.baselineRequest(prompt, item))
		return res, expectTokens(t, fmt.Sprintf("Baseline(image=%s%s, prompt=%q)", img.Name, note, prompt), res)
	}

	// The uuid runs go first, so a cache keyed by uuid would serve B with A's answer.
	note := fmt.Sprintf(", uuid=%s", uuid)
	baseAU, ok1 := baseline(a, withUUID(a), note)
	baseBU, ok2 := baseline(b, withUUID(b), note)
	baseA, ok3 := baseline(a, imageItem(a), "")
	baseB, ok4 := baseline(b, imageItem(b), "")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	if sameAnswer(baseA, baseB) {
		t.Fatalf("Baseline(image=%s) and Baseline(image=%s) agree on %q; want different images to get their own answers (H-2), else H-5 cannot be checked", a.Name, b.Name, prompt)
	}
	if !sameAnswer(baseAU, baseA) {
		t.Errorf("Baseline(image=%s%s) = tokens %s; want the answer without uuid %s", a.Name, note, tokensString(baseAU.TokenIDs()), tokensString(baseA.TokenIDs()))
	}
	if !sameAnswer(baseBU, baseB) {
		t.Errorf("Baseline(image=%s%s) after image=%s with the same uuid = tokens %s; want the answer without uuid %s", b.Name, note, a.Name, tokensString(baseBU.TokenIDs()), tokensString(baseB.TokenIDs()))
	}

	readyA := h.publishItems(nil, "image="+a.Name+note, withUUID(a))
	readyB := h.publishItems(nil, "image="+b.Name+note, withUUID(b))
	plainA := h.publish(a)
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
	}
	expectSameAsBaseline(t, fmt.Sprintf("image=%s%s, prompt=%q", a.Name, note, prompt), gotA, baseA)
	expectSameAsBaseline(t, fmt.Sprintf("image=%s%s, prompt=%q", b.Name, note, prompt), gotB, baseB)
}
