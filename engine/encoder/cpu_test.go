package encoder

import (
	"errors"
	"image"
	"math"
	"sync"
	"testing"

	"github.com/baton-dev/baton/fixtures"
)

func decodeFixture(t testing.TB, name string) image.Image {
	t.Helper()
	im, err := fixtures.ImageByName(name)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := Decode(im.Data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

var tinyCPU = sync.OnceValue(func() *CPU { return NewCPU(Tiny, DefaultSeed) })

func TestCPUEncodeShape(t *testing.T) {
	enc := tinyCPU()
	if enc.Preset() != Tiny {
		t.Fatalf("preset %+v", enc.Preset())
	}
	imgs := []image.Image{decodeFixture(t, "video-001.jpeg"), decodeFixture(t, "one-pixel.png")}
	out, err := enc.Encode(imgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(imgs) {
		t.Fatalf("%d embeddings for %d images", len(out), len(imgs))
	}
	for i, e := range out {
		if e.Rows != Tiny.Patches() || e.Cols != Tiny.OutDim || len(e.Data) != e.Rows*e.Cols {
			t.Errorf("embedding %d: %dx%d with %d values, want %dx%d", i, e.Rows, e.Cols, len(e.Data), Tiny.Patches(), Tiny.OutDim)
		}
		for j, v := range e.Data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("embedding %d value %d is %v", i, j, v)
			}
		}
	}
	if out, err := enc.Encode(nil); err != nil || len(out) != 0 {
		t.Errorf("empty batch: %v, %v", out, err)
	}
}

// Same image -> identical bits: twice in a row, in another batch, from another
// encoder with the same seed, and from concurrent callers.
func TestCPUEncodeDeterministic(t *testing.T) {
	a := decodeFixture(t, "video-001.jpeg")
	b := decodeFixture(t, "basn6a16.png")
	enc := tinyCPU()
	first, err := enc.Encode([]image.Image{a})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := enc.Encode([]image.Image{a})
	batch, _ := enc.Encode([]image.Image{b, a, b})
	fresh, _ := NewCPU(Tiny, DefaultSeed).Encode([]image.Image{a})
	for name, got := range map[string][]float32{"again": again[0].Data, "in a batch": batch[1].Data, "fresh encoder": fresh[0].Data} {
		if !bitsEqual(first[0].Data, got) {
			t.Errorf("%s: bits differ", name)
		}
	}
	var wg sync.WaitGroup
	results := make([][]Embedding, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = enc.Encode([]image.Image{a, b})
		}()
	}
	wg.Wait()
	for i, r := range results {
		if errs[i] != nil || !bitsEqual(r[0].Data, first[0].Data) || !bitsEqual(r[1].Data, batch[0].Data) {
			t.Errorf("concurrent caller %d: err %v or bits differ", i, errs[i])
		}
	}
}

// TestCPUEncodeDistinguishesImages_B2: different images give different
// embeddings; pixel-equal ones give equal embeddings (H-4).
func TestCPUEncodeDistinguishesImages_B2(t *testing.T) {
	names := []string{"video-001.jpeg", "video-005.gray.jpeg", "video-001.png", "basn6a08.png", "triangle-001.gif", "video-001.lossy.webp"}
	imgs := make([]image.Image, len(names))
	for i, n := range names {
		imgs[i] = decodeFixture(t, n)
	}
	out, err := tinyCPU().Encode(imgs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if bitsEqual(out[i].Data, out[j].Data) {
				t.Errorf("%s and %s encode identically", names[i], names[j])
			}
		}
	}
	pair := fixtures.PixelEqualPairs()[1]
	pa, _, _ := Decode(pair[0].Data, Limits{})
	pb, _, _ := Decode(pair[1].Data, Limits{})
	eq, err := tinyCPU().Encode([]image.Image{pa, pb})
	if err != nil {
		t.Fatal(err)
	}
	if !bitsEqual(eq[0].Data, eq[1].Data) {
		t.Errorf("pixel-equal %s and %s encode differently", pair[0].Name, pair[1].Name)
	}
}

func TestCPUSeedChangesWeights(t *testing.T) {
	a := NewWeights(Tiny, DefaultSeed)
	b := NewWeights(Tiny, DefaultSeed+1)
	if bitsEqual(a.W1, b.W1) || bitsEqual(a.W2, b.W2) {
		t.Error("different seeds give equal weights")
	}
	if !bitsEqual(a.W1, NewWeights(Tiny, DefaultSeed).W1) {
		t.Error("same seed gives different weights")
	}
	if len(a.W1) != Tiny.InDim*Tiny.HiddenDim || len(a.B1) != Tiny.HiddenDim || len(a.W2) != Tiny.HiddenDim*Tiny.OutDim || len(a.B2) != Tiny.OutDim {
		t.Errorf("weight shapes %d %d %d %d", len(a.W1), len(a.B1), len(a.W2), len(a.B2))
	}
	// Scale ~ 1/sqrt(fanIn): the sample standard deviation of W1 is within 5%.
	var ss float64
	for _, v := range a.W1 {
		ss += float64(v) * float64(v)
	}
	if sd, want := math.Sqrt(ss/float64(len(a.W1))), 1/math.Sqrt(float64(Tiny.InDim)); math.Abs(sd/want-1) > 0.05 {
		t.Errorf("W1 std %v, want about %v", sd, want)
	}
}

func TestCPUEncodeRejectsEmptyImages(t *testing.T) {
	good := decodeFixture(t, "one-pixel.png")
	tests := []struct {
		name string
		imgs []image.Image
	}{
		{"nil image", []image.Image{good, nil}},
		{"empty bounds", []image.Image{image.NewRGBA(image.Rect(3, 3, 3, 9))}},
	}
	for _, tt := range tests {
		out, err := tinyCPU().Encode(tt.imgs)
		if !errors.Is(err, ErrCorruptMedia) || out != nil {
			t.Errorf("%s: %v, %v; want ErrCorruptMedia and no output", tt.name, out, err)
		}
	}
}

func TestNewCPUPanicsOnInvalidPreset(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewCPU accepted an invalid preset")
		}
	}()
	NewCPU(Preset{Name: "bad"}, 1)
}

func TestGELU(t *testing.T) {
	tests := []struct{ x, want float32 }{
		{0, 0},
		{1, 0.8411920},
		{-1, -0.1588080},
		{2, 1.9545977},
		{-3, -0.0036373},
		{0.5, 0.3457140},
		{10, 10},
		{-10, 0},
	}
	for _, tt := range tests {
		if got := GELU(tt.x); math.Abs(float64(got-tt.want)) > 1e-6 {
			t.Errorf("GELU(%v) = %.7f, want %.7f", tt.x, got, tt.want)
		}
	}
}
