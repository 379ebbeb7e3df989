package suite

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func matches(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// validOpaque is a baton-json-v1 reference as the reference engine seals it.
const validOpaque = `{"v":1,"id":"0123456789abcdef0123456789abcdef","exp":1767225600000,"items":[{"hash":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","rows":8,"cols":16}],"tag":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}`

// sameJSON reports whether a and b decode to equal values.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("unmarshal %q: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("unmarshal %q: %v", b, err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// TestReferenceCodecIsByteExact: the codec reads the format's bytes only; every
// well-formed but non-canonical spelling is refused, and what it reads it
// writes back identically.
func TestReferenceCodecIsByteExact(t *testing.T) {
	for _, in := range []string{"", "garbage", "null", "[]", `{"v":1}{}`, `{"v":1`, `"str"`, "\x00\x00",
		validOpaque + " ", " " + validOpaque, strings.Replace(validOpaque, `"exp":`, `"exp": `, 1),
		strings.Replace(validOpaque, `"id":"0`, `"id":"\u0030`, 1), strings.Replace(validOpaque, `"rows":8,"cols":16`, `"cols":16,"rows":8`, 1),
		strings.Replace(validOpaque, `"rows":8`, `"rows":08`, 1), strings.Replace(validOpaque, `"exp":1767225600000`, `"exp":-0`, 1),
		strings.Replace(validOpaque, `"v":1`, `"v":2`, 1), strings.Replace(validOpaque, "bbbb", "BBBB", 1),
		strings.Replace(validOpaque, `"rows":8`, `"rows":4294967296`, 1), `{"v":1,"id":"x","exp":1,"items":[],"tag":"` + strings.Repeat("b", 64) + `"}`} {
		if _, err := decodeRef([]byte(in)); !errors.Is(err, errRefFormat) {
			t.Errorf("decodeRef(%q) = %v; want errRefFormat", in, err)
		}
	}
	r, err := decodeRef([]byte(validOpaque))
	if err != nil {
		t.Fatalf("decodeRef(valid) = %v", err)
	}
	if got := encodeFields(r.fields()); string(got) != validOpaque {
		t.Errorf("re-encoded %s; want the same bytes", got)
	}
	two := strings.Replace(validOpaque, `"cols":16}]`, `"cols":16},{"hash":"","rows":1,"cols":4294967295}]`, 1)
	r, err = decodeRef([]byte(two))
	if err != nil || len(r.Items) != 2 || r.Items[1].Cols != 4294967295 || string(encodeFields(r.fields())) != two {
		t.Errorf("decodeRef(two items) = %+v, %v", r, err)
	}
}

// TestReferenceCodecReadsTheVectors: the harness's codec, written apart from the
// engine, reads every documented vector (fixtures/vectors/reference.json)
// and writes it back byte for byte.
func TestReferenceCodecReadsTheVectors(t *testing.T) {
	raw, err := os.ReadFile("../../fixtures/vectors/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			EntryID     string `json:"entry_id"`
			Exp         int64  `json:"exp"`
			Tag         string `json:"tag"`
			OpaqueState string `json:"opaque_state"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil || len(file.Vectors) == 0 {
		t.Fatalf("vectors: %v", err)
	}
	for _, v := range file.Vectors {
		r, err := decodeRef([]byte(v.OpaqueState))
		if err != nil {
			t.Fatalf("decodeRef(%s) = %v", v.OpaqueState, err)
		}
		if r.ID != v.EntryID || r.Exp != v.Exp || r.Tag != v.Tag || string(encodeFields(r.fields())) != v.OpaqueState {
			t.Errorf("decodeRef(%s) = %+v", v.OpaqueState, r)
		}
	}
}

func TestRefID(t *testing.T) {
	if id, err := refID([]byte(validOpaque)); err != nil || id != "0123456789abcdef0123456789abcdef" {
		t.Errorf("refID(valid) = %q, %v", id, err)
	}
	for _, in := range []string{`{"id":5}`, `{}`, `garbage`} {
		if _, err := refID([]byte(in)); !errors.Is(err, errRefFormat) {
			t.Errorf("refID(%q) = %v; want errRefFormat", in, err)
		}
	}
}

func TestRefPayloadBytes(t *testing.T) {
	if n, err := refPayloadBytes([]byte(validOpaque)); err != nil || n != 8*16*4 {
		t.Errorf("refPayloadBytes(valid) = %d, %v; want 512", n, err)
	}
	for _, in := range []string{`{"items":{}}`, `{"items":[1]}`, strings.Replace(validOpaque, `"rows":8`, `"rows":"8"`, 1), `x`} {
		if _, err := refPayloadBytes([]byte(in)); !errors.Is(err, errRefFormat) {
			t.Errorf("refPayloadBytes(%q) = %v; want errRefFormat", in, err)
		}
	}
}

func TestRefEdits(t *testing.T) {
	valid := []byte(validOpaque)
	with, err := refWith(valid, "id", "../../proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(validOpaque, "0123456789abcdef0123456789abcdef", "../../proc/self/status", 1); string(with) != want {
		t.Errorf("refWith id = %s; want only the id's bytes changed: %s", with, want)
	}
	other, err := refWith(valid, "id", "fedcba9876543210fedcba9876543210")
	if err != nil || !bytes.Contains(other, []byte(`"id":"fedcba9876543210fedcba9876543210"`)) || !bytes.HasSuffix(other, []byte(strings.Repeat("b", 64)+`"}`)) {
		t.Errorf("refWith(another id) = %s, %v; want the same tag", other, err)
	}
	typed, err := refWith(valid, "v", "1")
	if err != nil || !bytes.HasPrefix(typed, []byte(`{"v":"1","id":`)) {
		t.Errorf("refWith(v, string) = %s, %v", typed, err)
	}
	if _, err := refWith(valid, "nope", 1); err == nil {
		t.Errorf("refWith(missing) = nil error; want one")
	}
	without, err := refWithout(valid, "tag")
	if err != nil || bytes.Contains(without, []byte(`"tag"`)) || !json.Valid(without) {
		t.Errorf("refWithout(tag) = %s, %v", without, err)
	}
	if _, err := refWithout(valid, "nope"); err == nil {
		t.Errorf("refWithout(missing) = nil error; want one")
	}

	hashed, err := refWithItemHash(valid, 0, "zz")
	if want := strings.Replace(validOpaque, strings.Repeat("a", 64), "zz", 1); err != nil || string(hashed) != want {
		t.Errorf("refWithItemHash = %s, %v; want %s", hashed, err, want)
	}
	for _, i := range []int{-1, 1} {
		if _, err := refWithItemHash(valid, i, "zz"); err == nil {
			t.Errorf("refWithItemHash(item %d of 1) = nil error; want one", i)
		}
	}
	if _, err := refWithItemHash([]byte(`{"items":"x"}`), 0, "zz"); err == nil {
		t.Errorf("refWithItemHash(not the format) = nil error")
	}

	altered, err := refWithTagAltered(valid)
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeRef(altered)
	if err != nil {
		t.Fatalf("refWithTagAltered is not well-formed: %v", err)
	}
	diff := 0
	for i := range r.Tag {
		if r.Tag[i] != 'b' {
			diff++
		}
	}
	if len(r.Tag) != 64 || diff != 1 || !matches(`^[0-9a-f]{64}$`, r.Tag) || len(altered) != len(valid) {
		t.Errorf("refWithTagAltered tag = %q; want 64 lowercase hex differing in one digit", r.Tag)
	}
	if _, err := refWithTagAltered([]byte(`{"tag":5}`)); err == nil {
		t.Errorf("refWithTagAltered(numeric tag) = nil error")
	}
	if got := flipHexDigit("0a", 0); got != "1a" {
		t.Errorf("flipHexDigit(0a, 0) = %q", got)
	}
	if got := flipHexDigit("0a", 1); got != "00" {
		t.Errorf("flipHexDigit(0a, 1) = %q", got)
	}
}

func TestRefNested(t *testing.T) {
	valid := []byte(validOpaque)
	if d := jsonDepth(valid); d != 3 {
		t.Fatalf("jsonDepth(valid) = %d; want 3", d)
	}
	for _, depth := range []int{2, 4, 64} {
		got, err := refNested(valid, depth)
		if err != nil {
			t.Fatal(err)
		}
		if d := jsonDepth(got); d != max(depth, 3) {
			t.Errorf("jsonDepth(refNested(%d)) = %d", depth, d)
		}
		if !json.Valid(got) {
			t.Errorf("refNested(%d) is not valid JSON", depth)
		}
	}
	if _, err := refNested(valid, 1); err == nil {
		t.Errorf("refNested(1) = nil error; want one")
	}
	if d := jsonDepth([]byte(`{"a":"[[[[{{"}`)); d != 1 {
		t.Errorf("jsonDepth counts brackets in strings: %d", d)
	}
	if d := jsonDepth([]byte(`{"a":"\"[["}`)); d != 1 {
		t.Errorf("jsonDepth mishandles escaped quotes: %d", d)
	}
}

func TestPadRef(t *testing.T) {
	valid := []byte(validOpaque)
	for _, n := range []int{len(valid), maxReferenceBytes, maxReferenceBytes + 1} {
		got, err := padRef(valid, n)
		if err != nil {
			t.Fatalf("padRef(%d): %v", n, err)
		}
		if len(got) != n {
			t.Errorf("len(padRef(%d)) = %d", n, len(got))
		}
		if !sameJSON(t, got, valid) {
			t.Errorf("padRef(%d) changed the JSON document", n)
		}
		if _, err := decodeRef(got); n > len(valid) && err == nil {
			t.Errorf("padRef(%d) is still the format's bytes; it must not be", n)
		}
	}
	if _, err := padRef(valid, len(valid)-1); err == nil {
		t.Errorf("padRef(shorter) = nil error; want one")
	}
	if _, err := padRef([]byte("garbage"), 100); !errors.Is(err, errRefFormat) {
		t.Errorf("padRef(garbage) = %v; want errRefFormat", err)
	}
}

func TestMalformedOpaques(t *testing.T) {
	valid := []byte(validOpaque)
	black, err := malformedOpaques(valid, false)
	if err != nil {
		t.Fatal(err)
	}
	full, err := malformedOpaques(valid, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) <= len(black) {
		t.Errorf("format variants add nothing: %d vs %d", len(full), len(black))
	}
	validRef, err := decodeRef(valid)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, v := range full {
		if names[v.name] {
			t.Errorf("variant %q twice", v.name)
		}
		names[v.name] = true
		if bytes.Equal(v.opaque, valid) {
			t.Errorf("variant %q equals the valid reference", v.name)
		}
		// Every variant is either not the format's bytes (SU-4) or no
		// longer carries the valid tag over the same body (SU-5).
		if r, err := decodeRef(v.opaque); err == nil && reflect.DeepEqual(r, validRef) {
			t.Errorf("variant %q is the valid reference in disguise: %s", v.name, v.opaque)
		}
	}
	for _, want := range []string{"empty", "64 garbage bytes", "nesting 4 deep", "trailing data"} {
		if !names[want] {
			t.Errorf("no variant %q", want)
		}
	}
	if _, err := malformedOpaques([]byte("not json"), true); err == nil {
		t.Errorf("malformedOpaques(non-JSON, format declared) = nil error; want one")
	}
	if vs, err := malformedOpaques([]byte("opaque-bytes"), false); err != nil || len(vs) != len(black) {
		t.Errorf("malformedOpaques(opaque format) = %d, %v", len(vs), err)
	}
	if vs, err := malformedOpaques(nil, false); err != nil || len(vs) == 0 {
		t.Errorf("malformedOpaques(empty) = %d, %v", len(vs), err)
	}
}
