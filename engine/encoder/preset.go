package encoder

import (
	"errors"
	"fmt"
)

// ErrUnknownPreset is returned by PresetByName for a name that is not one of
// "tiny", "base", "large".
var ErrUnknownPreset = errors.New("encoder: unknown preset")

// Preset fixes the geometry of the encoder: images are resized to
// ImageSize x ImageSize pixels, cut into square patches of PatchSize pixels,
// and each patch (InDim = 3*PatchSize*PatchSize float32 values) goes through
// InDim -> HiddenDim -> OutDim. The preset's Name is part of the content hash
// (rule H-1): the same pixels under two presets hash differently.
type Preset struct {
	// Name is the preset's name ("tiny", "base", "large"), hashed into
	// H-1's content hash.
	Name                     string
	ImageSize, PatchSize     int // pixels
	InDim, HiddenDim, OutDim int // float32 elements per patch
}

// Patches returns the number of patches per image, (ImageSize/PatchSize)^2;
// it is the Rows of every Embedding under this preset.
func (p Preset) Patches() int {
	if p.PatchSize <= 0 {
		return 0
	}
	n := p.ImageSize / p.PatchSize
	return n * n
}

// Validate reports whether the preset is consistent: positive sizes,
// ImageSize a multiple of PatchSize, InDim == 3*PatchSize*PatchSize, and a
// non-empty Name of at most 255 bytes.
func (p Preset) Validate() error {
	switch {
	case p.Name == "" || len(p.Name) > 255:
		return fmt.Errorf("encoder: preset name %q: want 1..255 bytes", p.Name)
	case p.ImageSize <= 0 || p.PatchSize <= 0 || p.HiddenDim <= 0 || p.OutDim <= 0:
		return fmt.Errorf("encoder: preset %s: sizes must be positive", p.Name)
	case p.ImageSize%p.PatchSize != 0:
		return fmt.Errorf("encoder: preset %s: image size %d is not a multiple of patch size %d", p.Name, p.ImageSize, p.PatchSize)
	case p.InDim != 3*p.PatchSize*p.PatchSize:
		return fmt.Errorf("encoder: preset %s: in dim %d != 3*%d*%d", p.Name, p.InDim, p.PatchSize, p.PatchSize)
	}
	return nil
}

// The presets. Tiny is for tests (196 patches of 16x16, 768 -> 256 -> 512);
// Base is the demo default (576 patches of 14x14, 588 -> 768 -> 1024; the
// geometry of a CLIP ViT-L/14 at 336 px); Large is 1024 patches of 14x14,
// 588 -> 1024 -> 2048 (448 px).
var (
	Tiny  = Preset{Name: "tiny", ImageSize: 224, PatchSize: 16, InDim: 768, HiddenDim: 256, OutDim: 512}
	Base  = Preset{Name: "base", ImageSize: 336, PatchSize: 14, InDim: 588, HiddenDim: 768, OutDim: 1024}
	Large = Preset{Name: "large", ImageSize: 448, PatchSize: 14, InDim: 588, HiddenDim: 1024, OutDim: 2048}
)

// DefaultPresetName is the preset the demo engine uses when none is
// configured.
const DefaultPresetName = "base"

// Presets returns Tiny, Base and Large, in that order.
func Presets() []Preset { return []Preset{Tiny, Base, Large} }

// PresetByName returns the preset called name ("tiny", "base", "large"), or
// an error wrapping ErrUnknownPreset.
func PresetByName(name string) (Preset, error) {
	for _, p := range Presets() {
		if p.Name == name {
			return p, nil
		}
	}
	return Preset{}, fmt.Errorf("%w: %q (want tiny, base or large)", ErrUnknownPreset, name)
}
