package handoff

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

const producerID = "0f0e0d0c-0b0a-4908-8706-050403020100"

func sampleReference() Reference {
	return Reference{Backend: "shared_dir", ProducerInstanceID: producerID, EntryID: strings.Repeat("ab", 16), ExpiresUnixMs: 1000,
		Items: []ItemMeta{{ContentHash: strings.Repeat("0f", 32), Rows: 196, Cols: 512}}}
}

func TestReferenceRoundTrip(t *testing.T) {
	key := []byte("k1")
	ref := sampleReference()
	opaque := ref.Seal(key)
	got, err := ParseReference("shared_dir", producerID, opaque, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(key); err != nil {
		t.Fatalf("SU-5 own reference does not verify: %v", err)
	}
	if got.PayloadBytes() != 196*512*4 {
		t.Errorf("payload %d", got.PayloadBytes())
	}
	for _, c := range []struct {
		name              string
		backend, producer string
		key               []byte
	}{
		{"SU-5 another key (another producer)", "shared_dir", producerID, []byte("k2")},
		{"SU-5 another backend", "tcp", producerID, key},
		{"SU-5 another instance", "shared_dir", "11111111-2222-4333-8444-555555555555", key},
	} {
		r, err := ParseReference(c.backend, c.producer, opaque, 0)
		if err != nil {
			t.Fatalf("%s: parse %v", c.name, err)
		}
		if err := r.Verify(c.key); !errors.Is(err, ErrForeignReference) {
			t.Errorf("%s: Verify = %v, want ErrForeignReference", c.name, err)
		}
	}
}

// TestParseReferenceMalformed is the malformed-input test of the reference path (SU-4, SU-5, L-1, H-3).
func TestParseReferenceMalformed(t *testing.T) {
	valid := string(sampleReference().Seal([]byte("k")))
	cases := []struct {
		name   string
		opaque string
		want   error
		rule   string
	}{
		{"empty", "", ErrMalformedReference, "SU-4"},
		{"garbage", "\x00\x01not json", ErrMalformedReference, "SU-4"},
		{"truncated", valid[:len(valid)/2], ErrMalformedReference, "SU-4"},
		{"wrong types", strings.Replace(valid, `"v":1`, `"v":"1"`, 1), ErrMalformedReference, "SU-4"},
		{"unknown field", strings.Replace(valid, `{"v":1`, `{"path":"/etc/passwd","v":1`, 1), ErrMalformedReference, "SU-4"},
		{"too deep", `{"v":1,"items":[{"hash":[[["x"]]]}]}`, ErrMalformedReference, "SU-4"},
		{"trailing data", valid + "{}", ErrMalformedReference, "SU-4"},
		{"upper-case key", strings.Replace(valid, `"id"`, `"ID"`, 1), ErrMalformedReference, "SU-4"},
		{"duplicate key", strings.Replace(valid, `{"v":1`, `{"v":1,"v":1`, 1), ErrMalformedReference, "SU-4"},
		{"duplicate item key", strings.Replace(valid, `"rows":196`, `"rows":196,"rows":196`, 1), ErrMalformedReference, "SU-4"},
		{"missing tag", strings.Replace(valid, `"tag"`, `"tog"`, 1), ErrMalformedReference, "SU-4"},
		{"path id", strings.Replace(valid, strings.Repeat("ab", 16), "../../../../etc/passwd", 1), ErrForeignReference, "SU-5"},
		{"uppercase hash", strings.Replace(valid, strings.Repeat("0f", 32), strings.Repeat("0F", 32), 1), ErrMalformedHash, "H-3"},
		{"short hash", strings.Replace(valid, strings.Repeat("0f", 32), strings.Repeat("0f", 31), 1), ErrMalformedHash, "H-3"},
		{"zero rows", strings.Replace(valid, `"rows":196`, `"rows":0`, 1), ErrMalformedReference, "SU-4"},
		{"oversize", valid + strings.Repeat(" ", MaxOpaqueStateBytes), ErrTooLarge, "L-1"},
	}
	for _, c := range cases {
		t.Run(c.rule+" "+c.name, func(t *testing.T) {
			_, err := ParseReference("shared_dir", producerID, []byte(c.opaque), 0)
			if !errors.Is(err, c.want) {
				t.Fatalf("ParseReference = %v, want %v", err, c.want)
			}
			if rule, code := Classify(err); rule != c.rule || code != CodeInvalidArgument {
				t.Errorf("Classify = %s %d, want %s INVALID_ARGUMENT", rule, code, c.rule)
			}
		})
	}
	// JSON whitespace is legal: a valid reference padded under the limit still parses.
	padded := bytes.Repeat([]byte(" "), 1000)
	if _, err := ParseReference("shared_dir", producerID, append([]byte(valid), padded...), 0); err != nil {
		t.Errorf("padded valid reference: %v", err)
	}
	if _, err := ParseReference("shared_dir", "not-a-uuid", []byte(valid), 0); !errors.Is(err, ErrForeignReference) {
		t.Errorf("SU-5 bad producer id: %v", err)
	}
}

func TestPrecedenceTableCoversEveryRule(t *testing.T) {
	for _, r := range Precedence {
		found := false
		for _, c := range rejections {
			if c.rule == r {
				found = true
			}
		}
		if !found {
			t.Errorf("precedence rule %s has no sentinel in the rejection table", r)
		}
	}
	if rule, code := Classify(errors.New("disk on fire")); rule != "" || code != CodeInternal {
		t.Errorf("unexpected error classified as %s %d", rule, code)
	}
}
