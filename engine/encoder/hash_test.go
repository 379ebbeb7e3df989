package encoder

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/baton-dev/baton/fixtures"
)

// rewrite regenerates testdata/content_hash_vectors.json:
//
//	go test ./engine/encoder -run TestContentHashVectors -rewrite
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/content_hash_vectors.json from the current implementation")

const vectorsFile = "testdata/content_hash_vectors.json"

// synthetic images for the vectors, built in code; the description says how,
// so another implementation can rebuild them.
var synthetic = []struct {
	name, desc string
	build      func() image.Image
}{
	{"opaque-1x1", "*image.NRGBA 1x1, pixel NRGBA{0x12,0x34,0x56,0xff}", func() image.Image {
		m := image.NewNRGBA(image.Rect(0, 0, 1, 1))
		m.SetNRGBA(0, 0, color.NRGBA{0x12, 0x34, 0x56, 0xff})
		return m
	}},
	{"alpha0-2x2", "*image.NRGBA 2x2, row-major pixels {10,20,30,255} {200,100,50,0} {0,0,0,0} {1,2,3,128}: alpha-0 pixels keep their colour", alpha0(200)},
	{"alpha0-2x2-other-hidden-colour", "as alpha0-2x2 but pixel (1,0) is {201,100,50,0}", alpha0(201)},
	{"gray16-2x1", "*image.Gray16 2x1, values 0x1234, 0xfedc", func() image.Image {
		m := image.NewGray16(image.Rect(0, 0, 2, 1))
		m.SetGray16(0, 0, color.Gray16{0x1234})
		m.SetGray16(1, 0, color.Gray16{0xfedc})
		return m
	}},
	{"nrgba64-2x1", "*image.NRGBA64 2x1, pixels {0x0102,0x0304,0x0506,0xffff} {0xa0b0,0xc0d0,0xe0f0,0x0000}", func() image.Image {
		m := image.NewNRGBA64(image.Rect(0, 0, 2, 1))
		m.SetNRGBA64(0, 0, color.NRGBA64{0x0102, 0x0304, 0x0506, 0xffff})
		m.SetNRGBA64(1, 0, color.NRGBA64{0xa0b0, 0xc0d0, 0xe0f0, 0})
		return m
	}},
	{"paletted-2x2", "*image.Paletted 2x2, palette [RGBA{255,0,0,255}, RGBA{0,0,128,128}, RGBA{0,0,0,0}], indices 0 1 2 1", func() image.Image {
		m := image.NewPaletted(image.Rect(0, 0, 2, 2), color.Palette{
			color.RGBA{255, 0, 0, 255}, color.RGBA{0, 0, 128, 128}, color.RGBA{0, 0, 0, 0}})
		copy(m.Pix, []uint8{0, 1, 2, 1})
		return m
	}},
	{"rgba-premultiplied-2x1", "*image.RGBA (premultiplied) 2x1, pixels {100,50,25,200} {255,255,255,255}: converted by color.NRGBA64Model", func() image.Image {
		m := image.NewRGBA(image.Rect(0, 0, 2, 1))
		m.SetRGBA(0, 0, color.RGBA{100, 50, 25, 200})
		m.SetRGBA(1, 0, color.RGBA{255, 255, 255, 255})
		return m
	}},
	{"offset-origin-1x1", "*image.NRGBA with bounds (5,7)-(6,8), pixel {0x12,0x34,0x56,0xff}: same pre-image as opaque-1x1 (only the size counts)", func() image.Image {
		m := image.NewNRGBA(image.Rect(5, 7, 6, 8))
		m.SetNRGBA(5, 7, color.NRGBA{0x12, 0x34, 0x56, 0xff})
		return m
	}},
}

func alpha0(hidden uint8) func() image.Image {
	return func() image.Image {
		m := image.NewNRGBA(image.Rect(0, 0, 2, 2))
		m.SetNRGBA(0, 0, color.NRGBA{10, 20, 30, 255})
		m.SetNRGBA(1, 0, color.NRGBA{hidden, 100, 50, 0})
		m.SetNRGBA(0, 1, color.NRGBA{0, 0, 0, 0})
		m.SetNRGBA(1, 1, color.NRGBA{1, 2, 3, 128})
		return m
	}
}

var vectorFixtures = []string{"one-pixel.png", "basn6a16.png", "basn3p08.png", "basn0g16.png", "video-001.jpeg", "video-001.gif", "gopher-doc.with-alpha.png", "gopher-doc.with-alpha.lossless.webp"}

type hashVector struct {
	Name        string `json:"name"`
	Source      string `json:"source"` // "synthetic: <how>" or "fixture: <fixtures name>"
	Preset      string `json:"preset"`
	Width       int    `json:"width"`
	Height      int    `json:"height"`
	PreimageHex string `json:"preimage_hex,omitempty"` // the whole SHA-256 input, for images of <= 4 pixels
	SHA256      string `json:"sha256"`
}

type hashVectors struct {
	Comment string       `json:"comment"`
	Vectors []hashVector `json:"vectors"`
}

// preimage builds the SHA-256 input directly from the documented layout
// (independently of writeHashHeader/writePixels).
func preimage(p Preset, m image.Image, px func(x, y int) color.NRGBA64) []byte {
	var b bytes.Buffer
	b.WriteString("baton.encoder.v1/content-hash\x00")
	be32 := func(v int) { b.Write([]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}) }
	be32(len(p.Name))
	b.WriteString(p.Name)
	r := m.Bounds()
	be32(r.Dx())
	be32(r.Dy())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := px(x, y)
			for _, v := range []uint16{c.R, c.G, c.B, c.A} {
				b.Write([]byte{byte(v >> 8), byte(v)})
			}
		}
	}
	return b.Bytes()
}

// refPixel is the H-1 conversion written the slow, obvious way.
func refPixel(m image.Image) func(x, y int) color.NRGBA64 {
	return func(x, y int) color.NRGBA64 {
		switch m := m.(type) {
		case *image.NRGBA:
			c := m.NRGBAAt(x, y)
			return color.NRGBA64{uint16(c.R) * 0x101, uint16(c.G) * 0x101, uint16(c.B) * 0x101, uint16(c.A) * 0x101}
		case *image.NRGBA64:
			return m.NRGBA64At(x, y)
		}
		switch c := m.At(x, y).(type) {
		case color.NRGBA: // a palette entry with tRNS keeps its colour
			return color.NRGBA64{uint16(c.R) * 0x101, uint16(c.G) * 0x101, uint16(c.B) * 0x101, uint16(c.A) * 0x101}
		case color.NRGBA64:
			return c
		}
		return color.NRGBA64Model.Convert(m.At(x, y)).(color.NRGBA64)
	}
}

func computeVectors(t *testing.T) []hashVector {
	t.Helper()
	var out []hashVector
	add := func(name, source string, p Preset, m image.Image) {
		pre := preimage(p, m, refPixel(m))
		sum := sha256.Sum256(pre)
		v := hashVector{Name: name, Source: source, Preset: p.Name, Width: m.Bounds().Dx(), Height: m.Bounds().Dy(), SHA256: hex.EncodeToString(sum[:])}
		if v.Width*v.Height <= 4 {
			v.PreimageHex = hex.EncodeToString(pre)
		}
		out = append(out, v)
	}
	for _, s := range synthetic {
		add(s.name, "synthetic: "+s.desc, Tiny, s.build())
	}
	add("opaque-1x1-base", "synthetic: as opaque-1x1, preset base", Base, synthetic[0].build())
	for _, name := range vectorFixtures {
		im, err := fixtures.ImageByName(name)
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := Decode(im.Data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		add(name, "fixture: "+name, Tiny, m)
	}
	return out
}

// TestContentHashVectors_H1 recomputes the committed vectors, both from the
// documented layout (preimage) and with ContentHash.
func TestContentHashVectors_H1(t *testing.T) {
	got := computeVectors(t)
	if *rewrite {
		f := hashVectors{
			Comment: "baton content hash (CONTRACT H-1) test vectors. sha256 = SHA-256 over: \"baton.encoder.v1/content-hash\\x00\"; uint32 BE len(preset); preset; uint32 BE width; uint32 BE height; per pixel row-major R,G,B,A as uint16 BE, non-premultiplied (image.NRGBA64 Pix order): *image.NRGBA channels v*0x101, *image.NRGBA64 as-is, palette colours of type color.NRGBA/NRGBA64 the same way, others via color.NRGBA64Model. Fixtures are from github.com/baton-dev/baton/fixtures, decoded with Go's decoders. Regenerate: go test ./engine/encoder -run TestContentHashVectors -rewrite",
			Vectors: got,
		}
		b, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.FromSlash(vectorsFile), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s (%d vectors)", vectorsFile, len(got))
	}
	raw, err := os.ReadFile(filepath.FromSlash(vectorsFile))
	if err != nil {
		t.Fatalf("%v (run with -rewrite)", err)
	}
	var want hashVectors
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Vectors) != len(got) {
		t.Fatalf("%d committed vectors, %d computed (run with -rewrite after a deliberate change)", len(want.Vectors), len(got))
	}
	for i, w := range want.Vectors {
		if got[i] != w {
			t.Errorf("vector %s: computed %+v, committed %+v", w.Name, got[i], w)
		}
	}
	// ContentHash (with its fast paths) agrees with the reference pre-image.
	for _, s := range synthetic {
		if h, w := ContentHash(Tiny, s.build()), got[indexOf(got, s.name)].SHA256; h != w {
			t.Errorf("%s: ContentHash %s, reference %s", s.name, h, w)
		}
	}
	for _, name := range vectorFixtures {
		im, _ := fixtures.ImageByName(name)
		m, _, _ := Decode(im.Data, Limits{})
		if h, w := ContentHash(Tiny, m), got[indexOf(got, name)].SHA256; h != w {
			t.Errorf("%s (%T): ContentHash %s, reference %s", name, m, h, w)
		}
	}
}

func indexOf(vs []hashVector, name string) int {
	for i, v := range vs {
		if v.Name == name {
			return i
		}
	}
	panic("no vector " + name)
}

// Every fixture (all decoded types, fast paths included) hashes as the
// reference pre-image says.
func TestContentHashFastPaths_H1(t *testing.T) {
	for _, im := range fixtures.Images() {
		m, _, err := Decode(im.Data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(preimage(Tiny, m, refPixel(m)))
		if got := ContentHash(Tiny, m); got != hex.EncodeToString(sum[:]) {
			t.Errorf("%s (%T): fast path disagrees with the reference", im.Name, m)
		}
	}
}

func TestContentHashProperties_H1(t *testing.T) {
	mk := func(i int) image.Image { return synthetic[i].build() }
	h := func(m image.Image) string { return ContentHash(Tiny, m) }

	// Alpha-0 pixels with different hidden colour hash differently.
	if h(alpha0(200)()) == h(alpha0(201)()) {
		t.Error("alpha-0 pixels with different colours hash equal")
	}
	// 8-bit and 16-bit images with the same values (v*0x101) hash equal.
	n8 := alpha0(200)().(*image.NRGBA)
	n16 := image.NewNRGBA64(n8.Bounds())
	for i, v := range n8.Pix {
		n16.Pix[2*i], n16.Pix[2*i+1] = v, v
	}
	if h(n8) != h(n16) {
		t.Error("8-bit and pixel-equal 16-bit images hash differently")
	}
	// ...and a 16-bit value that is not v*0x101 differs.
	n16.Pix[1] ^= 1
	if h(n8) == h(n16) {
		t.Error("16-bit image differing in the low byte hashes equal to the 8-bit one")
	}
	// Gray and the equivalent opaque NRGBA hash equal.
	g := image.NewGray(image.Rect(0, 0, 2, 1))
	g.Pix[0], g.Pix[1] = 7, 250
	gn := image.NewNRGBA(g.Bounds())
	copy(gn.Pix, []uint8{7, 7, 7, 255, 250, 250, 250, 255})
	if h(g) != h(gn) {
		t.Error("gray and equal NRGBA hash differently")
	}
	// A different preset gives a different hash.
	if ContentHash(Tiny, mk(0)) == ContentHash(Base, mk(0)) {
		t.Error("presets tiny and base hash equal")
	}
	// The hash depends on the size, not only the pixel bytes: 2x1 vs 1x2.
	a := image.NewNRGBA(image.Rect(0, 0, 2, 1))
	b := image.NewNRGBA(image.Rect(0, 0, 1, 2))
	if h(a) == h(b) {
		t.Error("2x1 and 1x2 images with the same bytes hash equal")
	}
	// Only the size counts, not the origin.
	if h(mk(0)) != h(synthetic[indexOfSynthetic("offset-origin-1x1")].build()) {
		t.Error("origin changes the hash")
	}
	if !IsContentHash(h(mk(0))) {
		t.Error("ContentHash output fails IsContentHash")
	}
}

func indexOfSynthetic(name string) int {
	for i, s := range synthetic {
		if s.name == name {
			return i
		}
	}
	panic(name)
}

// TestPixelEqualPairsHashEqual_H4: PNG vs lossless re-encodes hash equal.
func TestPixelEqualPairsHashEqual_H4(t *testing.T) {
	pairs := fixtures.PixelEqualPairs()
	if len(pairs) < 2 {
		t.Fatalf("%d pairs", len(pairs))
	}
	for _, p := range pairs {
		a, _, err := Decode(p[0].Data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := Decode(p[1].Data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if ContentHash(Tiny, a) != ContentHash(Tiny, b) {
			t.Errorf("%s (%T) and %s (%T) hash differently", p[0].Name, a, p[1].Name, b)
		}
	}
	// A PNG re-encoded here at another compression level, too.
	im, _ := fixtures.ImageByName("basn6a16.png")
	m, _, _ := Decode(im.Data, Limits{})
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	m2, _, err := Decode(buf.Bytes(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(buf.Bytes(), im.Data) || ContentHash(Tiny, m) != ContentHash(Tiny, m2) {
		t.Error("16-bit PNG re-encode: bytes equal or hashes differ")
	}
}

func TestIsContentHash(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", true},
		{"E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", false},
		{"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85", false},
		{"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b8555", false},
		{"g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsContentHash(tt.in); got != tt.want {
			t.Errorf("IsContentHash(%q) = %v", tt.in, got)
		}
	}
}
