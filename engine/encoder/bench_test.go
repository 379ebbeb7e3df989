package encoder

import (
	"image"
	"testing"
)

// BenchmarkEncode measures one image per Encode call (a 150x103 JPEG
// fixture, so resize, normalise, patchify and both matrix products), per
// preset; it reports ms/image.
func BenchmarkEncode(b *testing.B) {
	img := decodeFixture(b, "video-001.jpeg")
	for _, p := range Presets() {
		b.Run(p.Name, func(b *testing.B) {
			enc := NewCPU(p, DefaultSeed)
			imgs := []image.Image{img}
			b.ResetTimer()
			for b.Loop() {
				if _, err := enc.Encode(imgs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N), "ms/image")
		})
	}
}

// BenchmarkContentHash hashes a 150x103 JPEG (YCbCr fast path).
func BenchmarkContentHash(b *testing.B) {
	img := decodeFixture(b, "video-001.jpeg")
	for b.Loop() {
		ContentHash(Tiny, img)
	}
}
