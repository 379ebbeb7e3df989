package suite

import (
	"bytes"
	"encoding/json"
	"errors"
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

func TestParseRefMalformed(t *testing.T) {
	for _, in := range []string{"", "garbage", "null", "[]", `{"v":1}{}`, `{"v":1`, `"str"`, "\x00\x00"} {
		if _, err := parseRef([]byte(in)); !errors.Is(err, errRefFormat) {
			t.Errorf("parseRef(%q) = %v; want errRefFormat", in, err)
		}
	}
	m, err := parseRef([]byte(validOpaque))
	if err != nil {
		t.Fatalf("parseRef(valid) = %v", err)
	}
	if !sameJSON(t, marshalRef(m), []byte(validOpaque)) {
		t.Errorf("marshalRef(parseRef(valid)) = %s; want the same JSON", marshalRef(m))
	}
	// exp survives exactly (json.Number, no float rounding).
	big := strings.Replace(validOpaque, "1767225600000", "9007199254740993", 1)
	m, _ = parseRef([]byte(big))
	if !bytes.Contains(marshalRef(m), []byte("9007199254740993")) {
		t.Errorf("marshalRef lost precision of exp: %s", marshalRef(m))
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
	for _, in := range []string{`{"items":{}}`, `{"items":[1]}`, `{"items":[{"rows":"8","cols":16}]}`, `{"items":[{"rows":8}]}`, `x`} {
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
	if id, _ := refID(with); id != "../../proc/self/status" {
		t.Errorf("refWith id = %q", id)
	}
	if tag, _ := parseRef(with); tag["tag"] != strings.Repeat("b", 64) {
		t.Errorf("refWith changed the tag: %v", tag["tag"])
	}
	without, err := refWithout(valid, "tag")
	if err != nil || bytes.Contains(without, []byte(`"tag"`)) {
		t.Errorf("refWithout(tag) = %s, %v", without, err)
	}
	if _, err := refWithout(valid, "nope"); err == nil {
		t.Errorf("refWithout(missing) = nil error; want one")
	}

	hashed, err := refWithItemHash(valid, 0, "zz")
	if err != nil || !bytes.Contains(hashed, []byte(`"hash":"zz"`)) {
		t.Errorf("refWithItemHash = %s, %v", hashed, err)
	}
	for _, i := range []int{-1, 1} {
		if _, err := refWithItemHash(valid, i, "zz"); err == nil {
			t.Errorf("refWithItemHash(item %d of 1) = nil error; want one", i)
		}
	}
	if _, err := refWithItemHash([]byte(`{"items":"x"}`), 0, "zz"); err == nil {
		t.Errorf("refWithItemHash(items not an array) = nil error")
	}
	if _, err := refWithItemHash([]byte(`{"items":[1]}`), 0, "zz"); err == nil {
		t.Errorf("refWithItemHash(item not an object) = nil error")
	}

	altered, err := refWithTagAltered(valid)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := parseRef(altered)
	tag := m["tag"].(string)
	diff := 0
	for i := range tag {
		if tag[i] != 'b' {
			diff++
		}
	}
	if len(tag) != 64 || diff != 1 || !matches(`^[0-9a-f]{64}$`, tag) {
		t.Errorf("refWithTagAltered tag = %q; want 64 lowercase hex differing in one digit", tag)
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
			t.Errorf("padRef(%d) changed the reference", n)
		}
		if jsonDepth(got) != 3 {
			t.Errorf("padRef(%d) changed the depth", n)
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
	names := map[string]bool{}
	for _, v := range full {
		if names[v.name] {
			t.Errorf("variant %q twice", v.name)
		}
		names[v.name] = true
		if bytes.Equal(v.opaque, valid) {
			t.Errorf("variant %q equals the valid reference", v.name)
		}
		// Every variant fails the strict reading a baton-json-v1 engine does
		// (shape, depth, types) or no longer carries the valid tag.
		m, perr := parseRef(v.opaque)
		strictOK := perr == nil && jsonDepth(v.opaque) <= maxReferenceDepth && strictShape(m)
		if strictOK && m["tag"] == strings.Repeat("b", 64) && sameJSON(t, v.opaque, valid) {
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

// strictShape reports whether m has the baton-json-v1 field types.
func strictShape(m map[string]any) bool {
	_, v := m["v"].(json.Number)
	_, id := m["id"].(string)
	_, exp := m["exp"].(json.Number)
	items, it := m["items"].([]any)
	_, tag := m["tag"].(string)
	return v && id && exp && it && len(items) > 0 && tag && len(m) == 5
}
