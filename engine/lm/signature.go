package lm

import "fmt"

// Image is one image's encoder output as the language model sees it.
type Image struct {
	// ContentHash is the image's content hash (CONTRACT H-1: lowercase hex
	// SHA-256 of decoded pixels and decode settings), used as its identity in
	// the prefix-cache key. "" means missing: Prefill then gives the image a
	// fresh random identity (H-2). Never put MediaItem.uuid here (H-5).
	ContentHash string
	// Rows is the number of embedding rows (patch tokens); the image occupies
	// Rows prompt positions. Cols is the embedding width. Both > 0.
	Rows, Cols int
	// Data holds the embeddings, float32 row-major [Rows, Cols]; len(Data) ==
	// Rows*Cols, every value finite.
	Data []float32
}

// Signature is the 256-bit summary of an image's embeddings that the model
// reads: for each of up to signatureBands row bands, the sign bits of 64 fixed
// random projections (see the package doc for why floating-point noise rarely
// flips it).
type Signature [signatureBands]uint64

const (
	signatureBands = 4
	// projectionSeed draws the fixed Rademacher projections; it is the same
	// for every Config.Seed, so signatures are comparable across models.
	projectionSeed uint64 = 0x6261746f6e2d6c6d // "baton-lm"
)

// validate checks the shape and values of one image; errors wrap ErrBadImage.
func (img Image) validate() error {
	if img.Rows <= 0 || img.Cols <= 0 {
		return fmt.Errorf("%w: shape [%d, %d]", ErrBadImage, img.Rows, img.Cols)
	}
	if int64(img.Rows)*int64(img.Cols) != int64(len(img.Data)) {
		return fmt.Errorf("%w: shape [%d, %d] but %d values", ErrBadImage, img.Rows, img.Cols, len(img.Data))
	}
	for i, v := range img.Data {
		if v-v != 0 { // NaN or +-Inf: finite v gives exactly 0
			return fmt.Errorf("%w: non-finite value %v at row %d col %d", ErrBadImage, v, i/img.Cols, i%img.Cols)
		}
	}
	return nil
}

// ImageSignature computes the signature of img's embeddings. It reads only
// Rows, Cols and Data (not ContentHash). Errors wrap ErrBadImage.
func ImageSignature(img Image) (Signature, error) {
	if err := img.validate(); err != nil {
		return Signature{}, err
	}
	return signature(img), nil
}

// signature assumes img is valid. Bands are contiguous row ranges
// [b*rows/bands, (b+1)*rows/bands); an image with fewer rows than bands uses one
// band per row and leaves the other words 0.
func signature(img Image) Signature {
	var sig Signature
	bands := min(signatureBands, img.Rows)
	pooled := make([]float64, img.Cols)
	for b := 0; b < bands; b++ {
		lo, hi := b*img.Rows/bands, (b+1)*img.Rows/bands
		clear(pooled)
		for r := lo; r < hi; r++ {
			row := img.Data[r*img.Cols : (r+1)*img.Cols]
			for j, v := range row {
				pooled[j] += float64(v)
			}
		}
		var avg float64
		for j := range pooled {
			pooled[j] /= float64(hi - lo)
			avg += pooled[j]
		}
		avg /= float64(img.Cols)
		var proj [64]float64
		for j, v := range pooled {
			v -= avg
			signs := mix64(projectionSeed ^ uint64(b)<<32 ^ uint64(j)) // bit k: sign of projection k at column j
			for k := range proj {
				if signs>>k&1 == 1 {
					proj[k] += v
				} else {
					proj[k] -= v
				}
			}
		}
		for k, p := range proj {
			if p > 0 {
				sig[b] |= 1 << k
			}
		}
	}
	return sig
}
