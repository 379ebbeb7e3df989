package encoder

import "image"

// Embedding is the encoder output for one image: a row-major float32 matrix
// of shape [Rows, Cols] = [Preset.Patches(), Preset.OutDim]; element (r, c)
// is Data[r*Cols+c], len(Data) == Rows*Cols.
type Embedding struct {
	// Rows is Preset.Patches() (one row per patch), Cols is Preset.OutDim.
	Rows, Cols int
	// Data holds the Rows*Cols elements, row-major.
	Data []float32
}

// Encoder encodes decoded images into embeddings. Implementations: CPU (this
// package) and the CUDA encoder (gpu/cuda). Implementations must be safe for
// concurrent Encode calls and give each image the same output whatever batch
// it arrives in.
type Encoder interface {
	// Preset returns the preset the encoder was built for.
	Preset() Preset
	// Encode returns one Embedding per image, in order, each of shape
	// [Preset().Patches(), Preset().OutDim]. A nil image or one with empty
	// bounds is an error wrapping ErrCorruptMedia; then no embedding is
	// returned. An empty batch returns an empty slice and no error.
	Encode(imgs []image.Image) ([]Embedding, error)
}
