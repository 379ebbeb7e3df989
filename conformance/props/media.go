package props

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"math/rand/v2"
	"slices"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"pgregory.net/rapid"
)

func init() { actionSets = append(actionSets, mediaActions) }

// mediaKind is one media check of a media action.
type mediaKind struct {
	name string
	run  func(mc *machine, t *rapid.T, base target.Engine)
}

// mediaActions registers the media checks the target claims, in two
// actions (each check is a few encoder runs, so more actions would slow
// every check): mediaHash, where the profile claims the Lifecycle level,
// which holds H-1 and H-4: the content hash over decoded non-premultiplied
// pixels (alphaVariants, H-1) or equal hashes for pixel-equal encodings
// (pixelEqualEncodings, H-4); mediaTwoImages, where the target has a
// baseline engine (B-1): answers equal to the baseline's for two images
// with one prompt, usually sharing one MediaItem.uuid (twoImages, B-2,
// H-5).
func mediaActions(mc *machine) map[string]func(*rapid.T) {
	base, hasBase := mc.tg.Engine(target.RoleBaseline)
	levels, _ := mc.profile.ClaimedLevels()
	groups := map[string][]mediaKind{}
	if slices.Contains(levels, "lifecycle") {
		groups["mediaHash"] = []mediaKind{{"pixel-equal encodings", (*machine).pixelEqualEncodings}, {"alpha variants", (*machine).alphaVariants}}
	}
	if hasBase {
		groups["mediaTwoImages"] = []mediaKind{{"two images, one prompt", (*machine).twoImages}}
	}
	actions := map[string]func(*rapid.T){}
	for name, kinds := range groups {
		actions[name] = func(t *rapid.T) {
			if mc.m.down["producer"] || mc.m.down["consumer"] {
				t.SkipNow() // S-2 decides every answer now
			}
			k := rapid.SampledFrom(kinds).Draw(t, "check")
			k.run(mc, t, base)
		}
	}
	return actions
}

// --- generated images -----------------------------------------------------------

// genImage is an image generated from rapid draws. Failure messages name
// it by its role ("the first image"), which no draw changes: rapid's
// shrinker keeps a smaller draw only when the failure message stays the
// same, so a message naming the seed would keep the seed from shrinking.
// name (the draws) goes to the step log.
type genImage struct {
	role, name string
	img        *image.NRGBA
}

// drawImage draws one seed (plus offset, so that two images drawn with
// different offsets differ even when the shrinker zeroes both seeds) and
// generates from it a small non-premultiplied image: 1..8 x 1..8 pixels,
// opaque or with alpha 0, partial and 255 mixed. One draw per image keeps
// the shrinker's work (and so the time to a shrunk failure) small.
func drawImage(t *rapid.T, role string, offset uint64) genImage {
	seed := rapid.Uint64().Draw(t, role+" seed") + offset
	r := rand.New(rand.NewPCG(seed, 0x73697a65)) // "size"
	w, h, opaque := 1+r.IntN(8), 1+r.IntN(8), r.IntN(2) == 0
	return genImage{role: role, name: role + ", " + imageName(w, h, seed, opaque), img: fillImage(w, h, seed, opaque)}
}

func imageName(w, h int, seed uint64, opaque bool) string {
	kind := "with alpha"
	if opaque {
		kind = "opaque"
	}
	return fmt.Sprintf("generated %dx%d image (seed %d, %s)", w, h, seed, kind)
}

func fillImage(w, h int, seed uint64, opaque bool) *image.NRGBA {
	r := rand.New(rand.NewPCG(seed, 0x70726f7073)) // "props"
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(m.Pix); i += 4 {
		m.Pix[i], m.Pix[i+1], m.Pix[i+2] = uint8(r.Uint32()), uint8(r.Uint32()), uint8(r.Uint32())
		switch a := r.IntN(3); {
		case opaque || a == 0:
			m.Pix[i+3] = 255
		case a == 1:
			m.Pix[i+3] = 0
		default:
			m.Pix[i+3] = uint8(1 + r.IntN(254))
		}
	}
	return m
}

func (g genImage) opaque() bool { return g.img.Opaque() }

// --- encodings ----------------------------------------------------------------

// encoding is one lossless wire form of a generated image.
type encoding struct {
	name string
	// ok reports whether the encoding keeps every pixel of g exactly.
	ok   func(g genImage) bool
	item func(g genImage) *pb.MediaItem
}

func always(genImage) bool { return true }

func rawItem(mime string, data []byte) *pb.MediaItem {
	return &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, MimeType: mime, Source: &pb.MediaItem_RawBytes{RawBytes: data}}
}

func pngBytes(m image.Image, level png.CompressionLevel) []byte {
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: level}).Encode(&buf, m); err != nil {
		panic("props: png encode: " + err.Error()) // an in-memory image always encodes
	}
	return buf.Bytes()
}

// paletted returns g as a paletted image with its exact colours (at most
// 64 pixels, so at most 64 colours).
func paletted(g genImage) *image.Paletted {
	var pal color.Palette
	b := g.img.Bounds()
	p := image.NewPaletted(b, nil)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := g.img.NRGBAAt(x, y)
			i := slices.IndexFunc(pal, func(pc color.Color) bool { return pc.(color.NRGBA) == c })
			if i < 0 {
				i = len(pal)
				pal = append(pal, c)
			}
			p.Pix[p.PixOffset(x, y)] = uint8(i)
		}
	}
	p.Palette = pal
	return p
}

// nrgba64 returns g at 16 bits per channel (v becomes v*0x101: the same
// pixels, H-1's conversion).
func nrgba64(g genImage) *image.NRGBA64 {
	b := g.img.Bounds()
	m := image.NewNRGBA64(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := g.img.NRGBAAt(x, y)
			m.SetNRGBA64(x, y, color.NRGBA64{R: uint16(c.R) * 0x101, G: uint16(c.G) * 0x101, B: uint16(c.B) * 0x101, A: uint16(c.A) * 0x101})
		}
	}
	return m
}

// encodings are the lossless wire forms a pixel-equal pair draws from
// (CONTRACT H-4: PNG vs lossless re-encode, data URI vs raw bytes).
var encodings = []encoding{
	{"PNG", always, func(g genImage) *pb.MediaItem { return rawItem("image/png", pngBytes(g.img, png.DefaultCompression)) }},
	{"PNG without compression", always, func(g genImage) *pb.MediaItem { return rawItem("image/png", pngBytes(g.img, png.NoCompression)) }},
	{"PNG at best compression", always, func(g genImage) *pb.MediaItem { return rawItem("image/png", pngBytes(g.img, png.BestCompression)) }},
	{"16-bit PNG", always, func(g genImage) *pb.MediaItem {
		return rawItem("image/png", pngBytes(nrgba64(g), png.DefaultCompression))
	}},
	{"paletted PNG", always, func(g genImage) *pb.MediaItem {
		return rawItem("image/png", pngBytes(paletted(g), png.DefaultCompression))
	}},
	{"GIF", genImage.opaque, func(g genImage) *pb.MediaItem { // GIF keeps no colour under alpha 0, no partial alpha
		var buf bytes.Buffer
		if err := gif.Encode(&buf, paletted(g), nil); err != nil {
			panic("props: gif encode: " + err.Error())
		}
		return rawItem("image/gif", buf.Bytes())
	}},
	{"PNG data URI", always, func(g genImage) *pb.MediaItem {
		uri := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes(g.img, png.DefaultCompression))
		return &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_DataUri{DataUri: uri}}
	}},
}

// --- the H-1 content hash -----------------------------------------------------

// contentHashTag starts every content-hash pre-image (CONTRACT H-1).
const contentHashTag = "baton.encoder.v1/content-hash\x00"

// presetKey is the ServerInfo.extra key naming the producer's preprocessing preset.
const presetKey = "baton.preset"

// preset returns the preprocessing preset the producer declares in
// ServerInfo.extra (H-1's pre-image includes it); "" when it declares none.
func (mc *machine) preset(t *rapid.T) string {
	ctx, cancel := mc.ctx()
	defer cancel()
	info, err := mc.prod.GetServerInfo(ctx)
	if err != nil {
		failf(t, statusString(err), "GetServerInfo(producer) failed; want ServerInfo")
	}
	return info.GetExtra().GetFields()[presetKey].GetStringValue()
}

// --- handoffs outside the model -----------------------------------------------

// mediaRefs are the references one media action publishes; they never
// enter the model: the action consumes or releases each before it ends
// (and releases them quietly when the check fails), so the producer's
// table is back where the model expects it.
type mediaRefs struct {
	mc   *machine
	refs []*pb.EncoderCacheRef
}

// releaseIfFailed releases every reference of the action when the check failed.
func (l *mediaRefs) releaseIfFailed(t *rapid.T) {
	if !t.Failed() {
		return
	}
	for _, r := range l.refs {
		ctx, cancel := l.mc.ctx()
		_, _ = l.mc.prod.Abort(ctx, abortRequest(r))
		cancel()
	}
}

// publish publishes item (what names it) and returns its reference and content hash.
func (l *mediaRefs) publish(t *rapid.T, what string, item *pb.MediaItem) (*pb.EncoderCacheRef, string) {
	t.Helper()
	mc := l.mc
	req := mc.publishRequest(0)
	req.Media = []*pb.MediaItem{item}
	ctx, cancel := mc.ctx()
	defer cancel()
	res := mc.generate(t, ctx, mc.prod, req)
	ready := res.EncoderReady()
	if ref := ready.GetRef(); ref != nil {
		l.refs = append(l.refs, ref)
	}
	if res.Code() != codes.OK || ready == nil || len(ready.GetItems()) != 1 {
		failf(t, describe(res), "Publish(%s) = %s; want OK with one EncoderReady of one item", what, brief(res))
	}
	h := ready.GetItems()[0].GetContentHash()
	if !isHexSHA256(h) {
		failf(t, h, "Publish(%s): content_hash is not 64 lowercase hex digits (H-1)", what)
	}
	return ready.GetRef(), h
}

// release releases ref, published by this action and not consumed: ABORTED (SU-3).
func (l *mediaRefs) release(t *rapid.T, what string, ref *pb.EncoderCacheRef) {
	t.Helper()
	l.abort(t, what, ref, pb.AbortStatus_ABORT_STATUS_ABORTED)
}

// abort aborts ref and expects want (SU-3); the reference leaves the action's list.
func (l *mediaRefs) abort(t *rapid.T, what string, ref *pb.EncoderCacheRef, want pb.AbortStatus) {
	t.Helper()
	ctx, cancel := l.mc.ctx()
	defer cancel()
	resp, err := l.mc.prod.Abort(ctx, abortRequest(ref))
	if err != nil || resp.GetStatus() != want {
		failf(t, statusString(err), "Abort(the reference to %s) = %s %s; want %s (SU-3)", what, resp.GetStatus(), codeName(status.Code(err)), want)
	}
	l.refs = slices.DeleteFunc(l.refs, func(r *pb.EncoderCacheRef) bool { return r == ref })
}

// consume consumes ref with prompt (answers with tokens, SU-1), then
// aborts it (ALREADY_FINISHED, SU-3: the producer looks, so its table
// drops the claimed entry), and returns the answer.
func (l *mediaRefs) consume(t *rapid.T, what, prompt string, ref *pb.EncoderCacheRef) *target.GenerateResult {
	t.Helper()
	mc := l.mc
	req := mc.consumeRequest(ref)
	req.Input = &pb.GenerateRequest_Prompt{Prompt: prompt}
	ctx, cancel := mc.ctx()
	defer cancel()
	res := mc.generate(t, ctx, mc.cons, req)
	if res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		failf(t, describe(res), "Consume(the live reference to %s) = %s; want tokens (SU-1)", what, brief(res))
	}
	l.abort(t, what+", consumed", ref, pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED)
	return res
}

// baseline asks the aggregated baseline about item with prompt.
func (mc *machine) baseline(t *rapid.T, base target.Engine, what, prompt string, item *pb.MediaItem) *target.GenerateResult {
	t.Helper()
	ctx, cancel := mc.ctx()
	defer cancel()
	res := mc.generate(t, ctx, base, mc.baselineRequest(prompt, item))
	if res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		failf(t, describe(res), "Baseline(%s) = %s; want tokens", what, brief(res))
	}
	return res
}

// freshPrompt is the configured prompt with a random suffix: no prefix
// cache has seen it, so the first answer to it is computed, not reused.
func (mc *machine) freshPrompt() string {
	return mc.cfg.Prompt + " (" + newRequestID("props") + ")"
}

func sameUsage(a, b *pb.Usage) bool {
	return a.GetPromptTokens() == b.GetPromptTokens() && a.GetCompletionTokens() == b.GetCompletionTokens() && a.GetTotalTokens() == b.GetTotalTokens()
}

// --- the checks ---------------------------------------------------------------

// pixelEqualEncodings publishes one generated image in two lossless wire
// forms: equal content hashes (H-4), equal to the H-1 hash of the pixels
// where the producer declares its preset, and equal answers to one prompt.
func (mc *machine) pixelEqualEncodings(t *rapid.T, _ target.Engine) {
	g := drawImage(t, "the image", 0)
	var fits []encoding
	for _, e := range encodings {
		if e.ok(g) {
			fits = append(fits, e)
		}
	}
	i := rapid.IntRange(0, len(fits)-1).Draw(t, "first encoding")
	j := rapid.IntRange(0, len(fits)-2).Draw(t, "second encoding")
	if j >= i {
		j++
	}
	a, b := fits[i], fits[j]
	mc.step(t, "publish %s as %s and as %s, consume both", g.name, a.name, b.name)
	l := &mediaRefs{mc: mc}
	defer l.releaseIfFailed(t)
	whatA, whatB := "the image in one lossless encoding", "the same image in another"
	refA, hashA := l.publish(t, whatA, a.item(g))
	refB, hashB := l.publish(t, whatB, b.item(g))
	if hashA != hashB {
		failf(t, hashA+" vs "+hashB, "Publish(%s) and Publish(%s) = different content hashes; want equal: pixel-equal media hash equal (H-4), the hash is over decoded pixels, not wire bytes (H-1)", whatA, whatB)
	}
	if preset := mc.preset(t); preset != "" {
		if want := fixtures.ContentHash(preset, g.img); hashA != want {
			failf(t, hashA+", want "+want, "Publish(%s) = a content hash other than SHA-256 of the domain tag, preset %q, width, height and the non-premultiplied 16-bit pixels (H-1)", whatA, preset)
		}
	}
	prompt := mc.freshPrompt()
	resA := l.consume(t, whatA, prompt, refA)
	resB := l.consume(t, whatB, prompt, refB)
	if !equalIDs(resA.TokenIDs(), resB.TokenIDs()) {
		failf(t, fmt.Sprintf("tokens %v vs %v", resA.TokenIDs(), resB.TokenIDs()), "E+PD(%s) and E+PD(%s) with one prompt = different answers; want equal: pixel-equal media give equal answers (H-4)", whatA, whatB)
	}
}

// alphaVariants publishes a generated image with alpha and a variant that
// differs only in the colour under an alpha-0 pixel or only in one
// pixel's alpha: different content hashes (H-1: the hash is over
// non-premultiplied pixels, so alpha-0 pixels cannot collide), each the H-1
// hash of its pixels where the producer declares its preset.
func (mc *machine) alphaVariants(t *rapid.T, _ target.Engine) {
	seed := rapid.Uint64().Draw(t, "seed")
	r := rand.New(rand.NewPCG(seed, 0x616c706861)) // "alpha"
	w, h := 1+r.IntN(8), 1+r.IntN(8)
	g := genImage{role: "the image", name: imageName(w, h, seed, false), img: fillImage(w, h, seed, false)}
	x, y := r.IntN(w), r.IntN(h)
	change := []string{"colour under alpha 0", "alpha"}[r.IntN(2)]
	v := genImage{role: "its variant", img: image.NewNRGBA(g.img.Bounds())}
	c := g.img.NRGBAAt(x, y)
	if change == "alpha" {
		a := r.IntN(255)
		if a >= int(c.A) {
			a++ // a different alpha, same colour
		}
		c.A = uint8(a)
		copy(v.img.Pix, g.img.Pix)
		v.img.SetNRGBA(x, y, c)
	} else {
		c.A = 0
		g.img.SetNRGBA(x, y, c)
		copy(v.img.Pix, g.img.Pix)
		c.R, c.G = c.R^0x80, c.G^0x01
		v.img.SetNRGBA(x, y, c)
	}
	mc.step(t, "publish the %s and a variant with the %s of pixel (%d,%d) changed", g.name, change, x, y)
	l := &mediaRefs{mc: mc}
	defer l.releaseIfFailed(t)
	preset := mc.preset(t)
	expectH1 := func(g genImage, hash string) {
		if want := fixtures.ContentHash(preset, g.img); preset != "" && hash != want {
			failf(t, hash+", want "+want, "Publish(%s of an image with alpha) = a content hash other than SHA-256 of the domain tag, preset %q, width, height and the non-premultiplied 16-bit pixels (H-1)", g.role, preset)
		}
	}
	refG, hashG := l.publish(t, g.role, pngItem(g, ""))
	expectH1(g, hashG)
	refV, hashV := l.publish(t, v.role+" (one pixel's alpha, or its colour under alpha 0, changed)", pngItem(v, ""))
	expectH1(v, hashV)
	if hashG == hashV {
		failf(t, hashG, "Publish(an image with alpha) and Publish(the image with one pixel's alpha, or its colour under alpha 0, changed) = one content hash; want different: the hash is over non-premultiplied 16-bit pixels, so alpha-0 pixels cannot collide (H-1)")
	}
	l.release(t, g.role, refG)
	l.release(t, v.role, refV)
}

// drawPair draws two generated images with different pixels.
func drawPair(t *rapid.T) (genImage, genImage) {
	a := drawImage(t, "the first image", 0)
	b := drawImage(t, "the second image", 1)
	if bytes.Equal(a.img.Pix, b.img.Pix) && a.img.Bounds() == b.img.Bounds() {
		t.SkipNow() // the same image twice
	}
	return a, b
}

// twoImages asks the baseline about two different images with one fresh
// prompt, the second first, then publishes both and consumes them in a
// row, the first first; usually every item carries one MediaItem.uuid.
// The producer's hashes differ, and each E+PD answer equals the
// baseline's for its image (B-1). The crossed order shows a prefix cache
// that reuses one image's answer for another, on the consumer or the
// baseline (B-2), and a baseline that keys the images by their shared
// uuid (H-5: a uuid is an id, never a substitute for the content hash).
func (mc *machine) twoImages(t *rapid.T, base target.Engine) {
	a, b := drawPair(t)
	uuid := newRequestID("props-uuid")
	if rapid.IntRange(0, 3).Draw(t, "without uuid") == 3 {
		uuid = ""
	}
	const rule = "B-2: different images with one prompt get their own answers; H-5: a MediaItem.uuid is never a substitute for the content hash"
	with := ""
	if uuid != "" {
		with = " with the shared uuid"
	}
	mc.step(t, "ask the baseline about %s, then %s, with one prompt%s; consume them the other way round", b.name, a.name, with)
	prompt := mc.freshPrompt()
	wantB := mc.baseline(t, base, b.role+with, prompt, pngItem(b, uuid))
	wantA := mc.baseline(t, base, a.role+with, prompt, pngItem(a, uuid))
	l := &mediaRefs{mc: mc}
	defer l.releaseIfFailed(t)
	refA, hashA := l.publish(t, a.role+with, pngItem(a, uuid))
	gotA := l.consume(t, a.role+with, prompt, refA)
	mc.expectBaselineAnswer(t, a, gotA, wantA, "consumed first; the baseline was asked about it second"+with, rule)
	refB, hashB := l.publish(t, b.role+with, pngItem(b, uuid))
	if hashA == hashB {
		failf(t, hashA, "Publish(%s) and Publish(%s)%s = one content hash; want each image's own (H-1; %s)", a.role, b.role, with, rule)
	}
	gotB := l.consume(t, b.role+with, prompt, refB)
	mc.expectBaselineAnswer(t, b, gotB, wantB, "consumed after the first with one prompt"+with, rule)
}

// pngItem is g as a PNG media item carrying uuid ("" for none).
func pngItem(g genImage, uuid string) *pb.MediaItem {
	it := rawItem("image/png", pngBytes(g.img, png.DefaultCompression))
	it.Uuid = uuid
	return it
}

// expectBaselineAnswer checks that the E+PD answer got for g equals the
// baseline's want in tokens and usage (B-1, and rule).
func (mc *machine) expectBaselineAnswer(t *rapid.T, g genImage, got, want *target.GenerateResult, what, rule string) {
	t.Helper()
	if !equalIDs(got.TokenIDs(), want.TokenIDs()) {
		failf(t, fmt.Sprintf("tokens %v, baseline %v", got.TokenIDs(), want.TokenIDs()),
			"E+PD(%s, %s) = an answer other than the baseline's for that image; want the baseline's (B-1; %s)", g.role, what, rule)
	}
	if !sameUsage(got.Usage(), want.Usage()) {
		failf(t, fmt.Sprintf("usage %v, baseline %v", got.Usage(), want.Usage()),
			"E+PD(%s) = a usage other than the baseline's; want equal (B-1: the encoder's usage is not counted)", g.role)
	}
}
