package handoff

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzKey is the key the fuzz target's sealed seeds use.
var fuzzKey = []byte("baton fuzz key: 32 bytes long!!!")

// FuzzParseReference: ParseReference never panics; whatever it accepts is
// exactly the canonical bytes of what it returns (BODY + tag framing), and
// whatever also verifies under the key re-seals to the identical bytes; a
// rejection is always one of its documented sentinels (L-1, SU-4, H-3).
// Seed corpus: testdata/fuzz/FuzzParseReference (plus the cases below).
func FuzzParseReference(f *testing.F) {
	ref := sampleReference()
	f.Add(ref.Seal(fuzzKey))
	ref.Items = ref.Items[:1]
	f.Add(ref.Seal(fuzzKey))
	f.Add([]byte(`{"v":1,"id":"\u0061","exp":1,"items":[{"hash":"","rows":1,"cols":1}],"tag":"` + string(bytes.Repeat([]byte("0"), 64)) + `"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, opaque []byte) {
		r, err := ParseReference("shared_dir", producerID, sampleEndpoint, opaque, 0)
		if err != nil {
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMalformedReference) && !errors.Is(err, ErrMalformedHash) {
				t.Fatalf("ParseReference error outside L-1/SU-4/H-3: %v", err)
			}
			return
		}
		framed := append(r.Body(), tagPrefix+r.Tag+tagSuffix...)
		if !bytes.Equal(framed, opaque) {
			t.Fatalf("accepted bytes are not canonical:\n got %q\nwant %q", opaque, framed)
		}
		if r.Verify(fuzzKey) == nil && !bytes.Equal(r.Seal(fuzzKey), opaque) {
			t.Fatalf("a verified reference re-seals to other bytes: %q", r.Seal(fuzzKey))
		}
	})
}
