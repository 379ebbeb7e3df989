package shareddir

import (
	"bytes"
	"crypto/rand"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// badEntryIDs are malformed entry ids (SU-4/SU-5), each of which would
// address something outside the instance dir or is not 128 bits of hex.
var badEntryIDs = []struct{ name, id string }{
	{"empty", ""},
	{"dot dot", "../x"},
	{"dot dot padded to 32", "../../../../../../../../etc/pass"},
	{"absolute path", "/etc/passwd"},
	{"uppercase hex", "0123456789ABCDEF0123456789ABCDEF"},
	{"31 chars", "0123456789abcdef0123456789abcde"},
	{"33 chars", "0123456789abcdef0123456789abcdef0"},
	{"non-hex letter", "0123456789abcdef0123456789abcdeg"},
	{"slash inside", "0123456789abcdef/123456789abcdef"},
	{"with suffix", "0123456789abcdef0123456789abcdef.safetensors"},
	{"nul byte", "0123456789abcdef0123456789abcde\x00"},
	{"hmac key name", "hmac.key"},
	{"unicode digits", "０123456789abcdef0123456789abcd"},
}

// badInstanceIDs are malformed producer instance ids.
var badInstanceIDs = []struct{ name, id string }{
	{"empty", ""},
	{"dot dot", "../0f1e2d3c-4b5a-4968-8776-a5b4c3d2"},
	{"absolute path", "/etc/passwd"},
	{"uppercase", "0F1E2D3C-4B5A-4968-8776-A5B4C3D2E1F0"},
	{"no dashes", "0f1e2d3c4b5a49688776a5b4c3d2e1f0"},
	{"dash misplaced", "0f1e2d3-c4b5a-4968-8776-a5b4c3d2e1f0"},
	{"braces", "{0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0}"},
	{"too short", "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f"},
	{"slash", "0f1e2d3c-4b5a-4968-8776/a5b4c3d2e1f0"},
	{"entry id", "0123456789abcdef0123456789abcdef"},
}

func TestValidateIDs(t *testing.T) {
	if err := ValidateInstanceID(testInstanceID); err != nil {
		t.Errorf("ValidateInstanceID(%q) = %v, want nil", testInstanceID, err)
	}
	if err := ValidateEntryID("0123456789abcdef0123456789abcdef"); err != nil {
		t.Errorf("ValidateEntryID(valid) = %v, want nil", err)
	}
	for _, tc := range badEntryIDs {
		if err := ValidateEntryID(tc.id); !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), "SU-5") {
			t.Errorf("SU-5 ValidateEntryID(%s %q) = %v, want ErrBadName citing SU-5", tc.name, tc.id, err)
		}
	}
	for _, tc := range badInstanceIDs {
		if err := ValidateInstanceID(tc.id); !errors.Is(err, ErrBadName) {
			t.Errorf("SU-5 ValidateInstanceID(%s %q) = %v, want ErrBadName", tc.name, tc.id, err)
		}
	}
}

func TestNewEntryID(t *testing.T) {
	id, err := NewEntryID(bytes.NewReader(bytes.Repeat([]byte{0xab}, 16)))
	if err != nil || id != strings.Repeat("ab", 16) {
		t.Fatalf("NewEntryID = %q, %v; want 16 bytes of 0xab as hex", id, err)
	}
	if _, err := NewEntryID(bytes.NewReader(make([]byte, 15))); err == nil {
		t.Fatal("NewEntryID with 15 random bytes = nil error, want an error")
	}
	id2, _ := NewEntryID(rand.Reader)
	if ValidateEntryID(id2) != nil {
		t.Fatalf("NewEntryID(crypto/rand) = %q, not a valid entry id", id2)
	}
}

func TestFileNameClassification(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name          string
		entry, orphan bool
	}{
		{id + ".safetensors", true, false},
		{".tmp-" + id + "-0123456789abcdef", false, true},
		{".tmp-key-0123456789abcdef", false, true},
		{".claimed-" + id + "-0123456789abcdef", false, true},
		{".claimed-key-0123456789abcdef", false, false},
		{".tmp-" + id + "-0123", false, false},
		{".tmp-" + id, false, false},
		{"hmac.key", false, false},
		{strings.ToUpper(id) + ".safetensors", false, false},
		{"notes.txt", false, false},
	}
	for _, tc := range tests {
		if _, ok := entryIDFromName(tc.name); ok != tc.entry {
			t.Errorf("entryIDFromName(%q) = %v, want %v", tc.name, ok, tc.entry)
		}
		if got := isOrphanCandidate(tc.name); got != tc.orphan {
			t.Errorf("isOrphanCandidate(%q) = %v, want %v", tc.name, got, tc.orphan)
		}
	}
}

// TestBadNamesTouchNothing: every function validates ids first, so a
// malformed id (SU-4/SU-5) reaches no file system call and changes nothing.
func TestBadNamesTouchNothing(t *testing.T) {
	d, root := newProducer(t)
	good := newEntryID(t)
	if _, err := d.Write(good, tinyOutput(2, 2, 0), nil); err != nil {
		t.Fatal(err)
	}
	before := tree(t, filepath.Dir(root))
	rec := &hookFS{inner: OSFS{}}
	d.fsys = rec
	for _, tc := range badEntryIDs {
		t.Run("entry "+tc.name, func(t *testing.T) {
			ops := []struct {
				op  string
				run func() error
			}{
				{"Write", func() error { _, err := d.Write(tc.id, tinyOutput(2, 2, 0), nil); return err }},
				{"Remove", func() error { _, err := d.Remove(tc.id); return err }},
				{"Exists", func() error { _, err := d.Exists(tc.id); return err }},
				{"Claim", func() error { _, _, err := Claim(rec, root, testInstanceID, tc.id, rand.Reader, 1<<20); return err }},
			}
			for _, c := range ops {
				if err := c.run(); !errors.Is(err, ErrBadName) {
					t.Errorf("SU-5 %s(%q) = %v, want ErrBadName", c.op, tc.id, err)
				}
			}
		})
	}
	for _, tc := range badInstanceIDs {
		t.Run("instance "+tc.name, func(t *testing.T) {
			if _, _, err := Claim(rec, root, tc.id, good, rand.Reader, 1<<20); !errors.Is(err, ErrBadName) {
				t.Errorf("SU-5 Claim(instance %q) = %v, want ErrBadName", tc.id, err)
			}
			if _, err := LoadProducerKey(rec, root, tc.id); !errors.Is(err, ErrBadName) {
				t.Errorf("SU-5 LoadProducerKey(%q) = %v, want ErrBadName", tc.id, err)
			}
			if _, err := OpenProducer(rec, root, tc.id, rand.Reader); !errors.Is(err, ErrBadName) {
				t.Errorf("SU-5 OpenProducer(%q) = %v, want ErrBadName", tc.id, err)
			}
		})
	}
	if calls := rec.Calls(); len(calls) != 0 {
		t.Errorf("SU-5 malformed ids reached the file system: %q", calls)
	}
	if after := tree(t, filepath.Dir(root)); !reflect.DeepEqual(before, after) {
		t.Errorf("SU-5 malformed ids changed the disk:\nbefore %q\nafter  %q", before, after)
	}
	if ok, err := d.Exists(good); !ok || err != nil {
		t.Errorf("SU-4 the valid entry after malformed attempts: Exists = %v, %v; want true", ok, err)
	}
}

// TestJoinIsFilepathJoin: the package's path joins (instanceDir, join,
// entryPath, instanceEntryPath, tempPath, tempFinalPaths, claimedPath) return exactly what
// filepath.Join does, for clean and unclean roots and for names that are
// and are not one plain element.
func TestJoinIsFilepathJoin(t *testing.T) {
	const inst = "0123abcd-0123-4567-89ab-0123456789ab"
	const id = "0123456789abcdef0123456789abcdef"
	roots := []string{"/var/cache/baton", "/var/cache/baton/", "/", "", ".", "..", "../x", "./x", "x", "x/", "a//b",
		"/a/./b", "/a/../b", "/a/b/..", "/a/b/.", "//", "/.", "rel/dir", "C:", `C:\x`, "/.hidden", "/a/.b"}
	names := []string{"hmac.key", "lock", ".tmp-key-0123456789abcdef", ".claimed-" + id + "-0123456789abcdef",
		id + entrySuffix, "", ".", "..", "a/b", "/a", "a/", "...", ".x", "x."}
	for _, root := range roots {
		dir := instanceDir(root, inst)
		if want := filepath.Join(root, inst); dir != want {
			t.Errorf("instanceDir(%q) = %q, want %q", root, dir, want)
		}
		entry, edir := instanceEntryPath(root, inst, id)
		if want := filepath.Join(root, inst, entryName(id)); entry != want || edir != dir {
			t.Errorf("instanceEntryPath(%q) = %q, %q, want %q, %q", root, entry, edir, want, dir)
		}
		const suffix = "0123456789abcdef"
		for _, d := range []string{dir, filepath.Join(root, "x")} {
			for _, infix := range []string{id, keyTmpInfix, lockTmpInfix} {
				name := tmpPrefix + infix + "-" + suffix
				if p, n := tempPath(d, infix, []byte(suffix)); p != filepath.Join(d, name) || n != name {
					t.Errorf("tempPath(%q, %q) = %q, %q, want %q, %q", d, infix, p, n, filepath.Join(d, name), name)
				}
			}
			fp, f, tp, tn := writePaths(d, id, []byte(suffix))
			if tmpName := tmpPrefix + id + "-" + suffix; fp != filepath.Join(d, entryName(id)) || f != entryName(id) || tp != filepath.Join(d, tmpName) || tn != tmpName {
				t.Errorf("writePaths(%q) = %q, %q, %q, %q", d, fp, f, tp, tn)
			}
			if got, want := claimedPath(d, id, []byte(suffix)), filepath.Join(d, claimedPrefix+id+"-"+suffix); got != want {
				t.Errorf("claimedPath(%q) = %q, want %q", d, got, want)
			}
			for _, name := range names {
				if got, want := join(d, name), filepath.Join(d, name); got != want {
					t.Errorf("join(%q, %q) = %q, want %q", d, name, got, want)
				}
				fp, tp, tn := tempFinalPaths(d, name, "key", []byte(suffix))
				if tmpName := tmpPrefix + "key-" + suffix; fp != filepath.Join(d, name) || tp != filepath.Join(d, tmpName) || tn != tmpName {
					t.Errorf("tempFinalPaths(%q, %q) = %q, %q, %q", d, name, fp, tp, tn)
				}
			}
			if got, want := entryPath(d, id), filepath.Join(d, entryName(id)); got != want {
				t.Errorf("entryPath(%q) = %q, want %q", d, got, want)
			}
		}
	}
}
