package encoder

import (
	"errors"
	"testing"
)

func TestPresetByName(t *testing.T) {
	tests := []struct {
		name     string
		wantErr  error
		patches  int
		inDim    int
		outDim   int
		imageDim int
	}{
		{"tiny", nil, 196, 768, 512, 224},
		{"base", nil, 576, 588, 1024, 336},
		{"large", nil, 1024, 588, 2048, 448},
		{"", ErrUnknownPreset, 0, 0, 0, 0},
		{"Base", ErrUnknownPreset, 0, 0, 0, 0},
		{"huge", ErrUnknownPreset, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		p, err := PresetByName(tt.name)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("PresetByName(%q) error %v, want %v", tt.name, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if p.Name != tt.name || p.Patches() != tt.patches || p.InDim != tt.inDim || p.OutDim != tt.outDim || p.ImageSize != tt.imageDim {
			t.Errorf("PresetByName(%q) = %+v (patches %d)", tt.name, p, p.Patches())
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", tt.name, err)
		}
	}
	if _, err := PresetByName(DefaultPresetName); err != nil {
		t.Errorf("default preset: %v", err)
	}
}

func TestPresetValidate(t *testing.T) {
	bad := []Preset{
		{},
		{Name: "x", ImageSize: 224, PatchSize: 15, InDim: 675, HiddenDim: 1, OutDim: 1},  // 224 % 15 != 0
		{Name: "x", ImageSize: 224, PatchSize: 16, InDim: 767, HiddenDim: 1, OutDim: 1},  // in dim
		{Name: "x", ImageSize: 224, PatchSize: 16, InDim: 768, HiddenDim: 0, OutDim: 1},  // hidden
		{Name: "", ImageSize: 224, PatchSize: 16, InDim: 768, HiddenDim: 1, OutDim: 1},   // name
		{Name: "x", ImageSize: -224, PatchSize: 16, InDim: 768, HiddenDim: 1, OutDim: 1}, // negative
	}
	for i, p := range bad {
		if p.Validate() == nil {
			t.Errorf("case %d: Validate(%+v) = nil, want an error", i, p)
		}
	}
	if (Preset{}).Patches() != 0 {
		t.Error("zero preset has patches")
	}
}
