package handoff

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

const producerID = "0f0e0d0c-0b0a-4908-8706-050403020100"

var sampleEndpoint = Endpoint{Host: "10.0.0.5", Port: 50051, Protocol: "grpc"}

func sampleReference() Reference {
	return Reference{Backend: "shared_dir", ProducerInstanceID: producerID, Endpoint: sampleEndpoint, EntryID: strings.Repeat("ab", 16), ExpiresUnixMs: 1000,
		Items: []ItemMeta{{ContentHash: strings.Repeat("0f", 32), Rows: 196, Cols: 512}, {ContentHash: "", Rows: 1, Cols: 8}}}
}

// accepted reports whether a consumer holding key would consume opaque
// presented with these outer fields: it parses and verifies (SU-4, H-3, SU-5).
func accepted(backend, producer string, ep Endpoint, opaque []byte, key []byte) bool {
	r, err := ParseReference(backend, producer, ep, opaque, 0)
	return err == nil && r.Verify(key) == nil
}

func TestReferenceRoundTrip(t *testing.T) {
	key := []byte("k1")
	ref := sampleReference()
	opaque := ref.Seal(key)
	got, err := ParseReference("shared_dir", producerID, sampleEndpoint, opaque, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(key); err != nil {
		t.Fatalf("SU-5 own reference does not verify: %v", err)
	}
	if got.PayloadBytes() != 196*512*4+8*4 {
		t.Errorf("payload %d", got.PayloadBytes())
	}
	if !bytes.Equal(got.Seal(key), opaque) {
		t.Errorf("re-sealed reference differs:\n%s\n%s", got.Seal(key), opaque)
	}
	for _, c := range []struct {
		name              string
		backend, producer string
		ep                Endpoint
		key               []byte
	}{
		{"SU-5 another key (another producer)", "shared_dir", producerID, sampleEndpoint, []byte("k2")},
		{"SU-5 another backend", "tcp", producerID, sampleEndpoint, key},
		{"SU-5 another instance", "shared_dir", "11111111-2222-4333-8444-555555555555", sampleEndpoint, key},
		{"SU-5 another endpoint host", "shared_dir", producerID, Endpoint{"10.0.0.6", 50051, "grpc"}, key},
		{"SU-5 another endpoint port", "shared_dir", producerID, Endpoint{"10.0.0.5", 50052, "grpc"}, key},
		{"SU-5 another endpoint protocol", "shared_dir", producerID, Endpoint{"10.0.0.5", 50051, "grpcs"}, key},
		{"SU-5 no endpoint", "shared_dir", producerID, Endpoint{}, key},
		// Length prefixes: moving bytes between adjacent fields changes the MAC input.
		{"SU-5 host/protocol boundary moved", "shared_dir", producerID, Endpoint{"10.0.0.5g", 50051, "rpc"}, key},
	} {
		r, err := ParseReference(c.backend, c.producer, c.ep, opaque, 0)
		if err != nil {
			t.Fatalf("%s: parse %v", c.name, err)
		}
		if err := r.Verify(c.key); !errors.Is(err, ErrForeignReference) {
			t.Errorf("%s: Verify = %v, want ErrForeignReference", c.name, err)
		}
	}
}

// TestReferenceCanonicalBytes pins the exact layout of the opaque state.
func TestReferenceCanonicalBytes(t *testing.T) {
	opaque := string(sampleReference().Seal([]byte("k")))
	want := `{"v":1,"id":"abababababababababababababababab","exp":1000,"items":[{"hash":"` + strings.Repeat("0f", 32) + `","rows":196,"cols":512},{"hash":"","rows":1,"cols":8}],"tag":"`
	if !strings.HasPrefix(opaque, want) || len(opaque) != len(want)+64+2 || !strings.HasSuffix(opaque, `"}`) {
		t.Fatalf("opaque state\n%s\nwant\n%s<64 hex>\"}", opaque, want)
	}
}

// TestReferenceTamperEvident is SU-5 byte for byte: a reference is accepted
// only exactly as the producer sealed it with its own outer fields.
func TestReferenceTamperEvident(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	valid := sampleReference().Seal(key)
	if !accepted("shared_dir", producerID, sampleEndpoint, valid, key) {
		t.Fatal("the valid reference is not accepted")
	}
	t.Run("escape in the id", func(t *testing.T) {
		// \u0061 is 'a': the same id to a JSON decoder, other bytes.
		op := bytes.Replace(valid, []byte(`"id":"ab`), []byte(`"id":"\u0061b`), 1)
		if accepted("shared_dir", producerID, sampleEndpoint, op, key) {
			t.Errorf("accepted %s", op)
		}
		if _, err := ParseReference("shared_dir", producerID, sampleEndpoint, op, 0); !errors.Is(err, ErrMalformedReference) {
			t.Errorf("ParseReference = %v, want SU-4 (non-canonical JSON)", err)
		}
	})
	t.Run("bytes appended after the tag", func(t *testing.T) {
		for _, tail := range []string{" ", "\n", "{}", "x", "\x00"} {
			if op := append(bytes.Clone(valid), tail...); accepted("shared_dir", producerID, sampleEndpoint, op, key) {
				t.Errorf("accepted with %q appended", tail)
			}
		}
	})
	t.Run("altered producer_endpoint", func(t *testing.T) {
		if accepted("shared_dir", producerID, Endpoint{"attacker.example", 50051, "grpc"}, valid, key) {
			t.Error("accepted under another producer_endpoint")
		}
	})
	t.Run("every single-byte flip", func(t *testing.T) {
		// Each of the 8 bit flips of every byte, and every byte replaced by
		// one of each class the grammar tells apart (FuzzParseReference
		// covers the rest): 33 changes a byte, about 0.3 s with -race.
		classes := []byte(" \"\\,:{}[]0159afgzAF-.\x00\x1f\x7f\x80\xff")
		for i := range valid {
			var vs []byte
			for bit := 0; bit < 8; bit++ {
				vs = append(vs, valid[i]^1<<bit)
			}
			for _, v := range append(vs, classes...) {
				if v == valid[i] {
					continue
				}
				op := bytes.Clone(valid)
				op[i] = v
				if accepted("shared_dir", producerID, sampleEndpoint, op, key) {
					t.Fatalf("accepted with byte %d changed from %q to %q: %s", i, valid[i], v, op)
				}
			}
		}
	})
	t.Run("truncation at every length", func(t *testing.T) {
		for n := 0; n < len(valid); n++ {
			if accepted("shared_dir", producerID, sampleEndpoint, valid[:n], key) {
				t.Fatalf("accepted truncated to %d bytes", n)
			}
		}
	})
	t.Run("each byte deleted or doubled", func(t *testing.T) {
		for i := range valid {
			del := append(bytes.Clone(valid[:i]), valid[i+1:]...)
			dup := append(bytes.Clone(valid[:i+1]), valid[i:]...)
			if accepted("shared_dir", producerID, sampleEndpoint, del, key) || accepted("shared_dir", producerID, sampleEndpoint, dup, key) {
				t.Fatalf("accepted with byte %d deleted or doubled", i)
			}
		}
	})
}

// TestParseReferenceMalformed is the malformed-input test of the reference path (SU-4, SU-5, L-1, H-3).
func TestParseReferenceMalformed(t *testing.T) {
	valid := string(sampleReference().Seal([]byte("k")))
	hash := strings.Repeat("0f", 32)
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
		{"version 2", strings.Replace(valid, `"v":1`, `"v":2`, 1), ErrMalformedReference, "SU-4"},
		{"unknown field", strings.Replace(valid, `{"v":1`, `{"path":"/etc/passwd","v":1`, 1), ErrMalformedReference, "SU-4"},
		{"too deep", `{"v":1,"items":[{"hash":[[["x"]]]}]}`, ErrMalformedReference, "SU-4"},
		{"trailing data", valid + "{}", ErrMalformedReference, "SU-4"},
		{"trailing space", valid + " ", ErrMalformedReference, "SU-4"},
		{"leading space", " " + valid, ErrMalformedReference, "SU-4"},
		{"space after a colon", strings.Replace(valid, `"exp":`, `"exp": `, 1), ErrMalformedReference, "SU-4"},
		{"keys reordered", strings.Replace(valid, `"rows":196,"cols":512`, `"cols":512,"rows":196`, 1), ErrMalformedReference, "SU-4"},
		{"escape in a hash", strings.Replace(valid, `"hash":"0f`, `"hash":"\u0030f`, 1), ErrMalformedReference, "SU-4"},
		{"non-ASCII in the id", strings.Replace(valid, `"id":"ab`, "\"id\":\"\xc3\xa9", 1), ErrMalformedReference, "SU-4"},
		{"leading zero", strings.Replace(valid, `"rows":196`, `"rows":0196`, 1), ErrMalformedReference, "SU-4"},
		{"exp as float", strings.Replace(valid, `"exp":1000`, `"exp":1000.0`, 1), ErrMalformedReference, "SU-4"},
		{"exp -0", strings.Replace(valid, `"exp":1000`, `"exp":-0`, 1), ErrMalformedReference, "SU-4"},
		{"exp over int64", strings.Replace(valid, `"exp":1000`, `"exp":9223372036854775808`, 1), ErrMalformedReference, "SU-4"},
		{"rows over uint32", strings.Replace(valid, `"rows":196`, `"rows":4294967296`, 1), ErrMalformedReference, "SU-4"},
		{"upper-case key", strings.Replace(valid, `"id"`, `"ID"`, 1), ErrMalformedReference, "SU-4"},
		{"duplicate key", strings.Replace(valid, `{"v":1`, `{"v":1,"v":1`, 1), ErrMalformedReference, "SU-4"},
		{"duplicate item key", strings.Replace(valid, `"rows":196`, `"rows":196,"rows":196`, 1), ErrMalformedReference, "SU-4"},
		{"missing tag", strings.Replace(valid, `"tag"`, `"tog"`, 1), ErrMalformedReference, "SU-4"},
		{"short tag", valid[:len(valid)-3] + `"}`, ErrMalformedReference, "SU-4"},
		{"upper-case tag", valid[:len(valid)-66] + strings.ToUpper(valid[len(valid)-66:len(valid)-2]) + `"}`, ErrMalformedReference, "SU-4"},
		{"no items", `{"v":1,"id":"abababababababababababababababab","exp":1000,"items":[],"tag":"` + strings.Repeat("0", 64) + `"}`, ErrMalformedReference, "SU-4"},
		{"zero rows", strings.Replace(valid, `"rows":196`, `"rows":0`, 1), ErrMalformedReference, "SU-4"},
		{"item too large", strings.Replace(valid, `"rows":196,"cols":512`, `"rows":65536,"cols":1025`, 1), ErrMalformedReference, "SU-4"},
		{"uppercase hash", strings.Replace(valid, hash, strings.ToUpper(hash), 1), ErrMalformedHash, "H-3"},
		{"short hash", strings.Replace(valid, hash, hash[2:], 1), ErrMalformedHash, "H-3"},
		{"path in a hash", strings.Replace(valid, hash, "../../etc/passwd", 1), ErrMalformedHash, "H-3"},
		{"oversize", valid + strings.Repeat(" ", MaxOpaqueStateBytes), ErrTooLarge, "L-1"},
		{"oversize garbage", strings.Repeat("\xff", MaxOpaqueStateBytes+1), ErrTooLarge, "L-1"},
	}
	for _, c := range cases {
		t.Run(c.rule+" "+c.name, func(t *testing.T) {
			_, err := ParseReference("shared_dir", producerID, sampleEndpoint, []byte(c.opaque), 0)
			if !errors.Is(err, c.want) {
				t.Fatalf("ParseReference = %v, want %v", err, c.want)
			}
			if rule, code := Classify(err); rule != c.rule || code != CodeInvalidArgument {
				t.Errorf("Classify = %s %d, want %s INVALID_ARGUMENT", rule, code, c.rule)
			}
		})
	}
	// More than MaxReferenceItems items is SU-4; exactly that many parse.
	many := sampleReference()
	many.Items = make([]ItemMeta, MaxReferenceItems)
	for i := range many.Items {
		many.Items[i] = ItemMeta{Rows: 1, Cols: 1}
	}
	if _, err := ParseReference("shared_dir", producerID, sampleEndpoint, many.Seal([]byte("k")), 0); err != nil {
		t.Errorf("%d items: %v", MaxReferenceItems, err)
	}
	many.Items = append(many.Items, ItemMeta{Rows: 1, Cols: 1})
	if _, err := ParseReference("shared_dir", producerID, sampleEndpoint, many.Seal([]byte("k")), 0); !errors.Is(err, ErrMalformedReference) {
		t.Errorf("%d items: %v, want SU-4", MaxReferenceItems+1, err)
	}
}

// TestVerifyConfinement: ids that could name a path are SU-5, decided by
// Verify (after N-1 and SE-3 in the caller), never by ParseReference.
func TestVerifyConfinement(t *testing.T) {
	key := []byte("k")
	for _, c := range []struct{ name, producer, id string }{
		{"path id", producerID, "../../../../etc/passwd"},
		{"absolute path id", producerID, "/etc/passwd"},
		{"upper-case id", producerID, strings.Repeat("AB", 16)},
		{"producer id not a UUID", "../" + producerID[3:], strings.Repeat("ab", 16)},
		{"empty producer id", "", strings.Repeat("ab", 16)},
	} {
		r := sampleReference()
		r.ProducerInstanceID, r.EntryID = c.producer, c.id
		opaque := r.Seal(key) // even correctly tagged
		got, err := ParseReference("shared_dir", c.producer, sampleEndpoint, opaque, 0)
		if err != nil {
			t.Fatalf("%s: ParseReference = %v, want it to parse (SU-5 is Verify's)", c.name, err)
		}
		for _, err := range []error{got.Verify(key), got.CheckIDs()} {
			if rule, code := Classify(err); !errors.Is(err, ErrForeignReference) || rule != "SU-5" || code != CodeInvalidArgument {
				t.Errorf("%s: %v (%s %d), want SU-5 INVALID_ARGUMENT", c.name, err, rule, code)
			}
		}
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
