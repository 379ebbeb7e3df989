package suite

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/baton-dev/baton/fixtures"
)

// TestContentHashMatchesProjectVectors checks the suite's own H-1
// implementation against the project's test vectors for fixture images
// (engine/encoder/testdata/content_hash_vectors.json, read as a file: the
// suite never imports the engine).
func TestContentHashMatchesProjectVectors(t *testing.T) {
	raw, err := os.ReadFile("../../engine/encoder/testdata/content_hash_vectors.json")
	if err != nil {
		t.Skipf("no project vectors: %v", err)
	}
	var file struct {
		Vectors []struct{ Name, Source, Preset, Sha256 string }
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, v := range file.Vectors {
		name, ok := strings.CutPrefix(v.Source, "fixture: ")
		if !ok {
			continue
		}
		img, err := fixtures.ImageByName(name)
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := decodeImage(img.Data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := fixtures.ContentHash(v.Preset, decoded); got != v.Sha256 {
			t.Errorf("fixtures.ContentHash(%q, %s) = %s; want %s", v.Preset, name, got, v.Sha256)
		}
		checked++
	}
	if checked < 5 {
		t.Errorf("checked %d fixture vectors; want at least 5", checked)
	}
}

// TestDecodeImageMalformed: malformed media do not decode.
func TestDecodeImageMalformed(t *testing.T) {
	for _, m := range fixtures.Malformed() {
		if m.Want == fixtures.WantBomb {
			continue // decoding a bomb allocates its claimed pixels
		}
		if m.Want == fixtures.WantStrict {
			continue // Go's decoders accept these; rejecting them is the target's strict L-6 check
		}
		if _, err := decodeImage(m.Data); !errors.Is(err, errUndecodable) {
			t.Errorf("decodeImage(%s) = %v; want errUndecodable", m.Name, err)
		}
	}
	if _, err := decodeImage(nil); !errors.Is(err, errUndecodable) {
		t.Errorf("decodeImage(nil) = %v; want errUndecodable", err)
	}
}
