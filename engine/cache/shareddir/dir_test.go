package shareddir

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenProducerLayoutAndPermissions: baton's own directories are 0700
// and its files 0600 whatever the umask; a root baton creates is 0700, and
// an existing root keeps its mode (`chmod 1777 d` stays drwxrwxrwt).
func TestOpenProducerLayoutAndPermissions(t *testing.T) {
	for _, umask := range []int{0o022, 0o000, 0o277} {
		for _, pre := range []struct {
			name string
			mode fs.FileMode // 0: root absent, created by OpenProducer
			want fs.FileMode
		}{
			{"root absent", 0, fs.ModeDir | 0o700},
			{"root 0755", 0o755, fs.ModeDir | 0o755},
			{"root 1777", fs.ModeSticky | 0o777, fs.ModeDir | fs.ModeSticky | 0o777},
		} {
			t.Run("umask "+fs.FileMode(umask).String()+" "+pre.name, func(t *testing.T) {
				parent := t.TempDir()
				root := filepath.Join(parent, "cache")
				if pre.mode != 0 {
					if err := os.Mkdir(root, 0o700); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(root, pre.mode); err != nil {
						t.Fatal(err)
					}
				}
				old := syscall.Umask(umask)
				defer syscall.Umask(old)
				d, err := OpenProducer(OSFS{}, root, testInstanceID, rand.Reader)
				if err != nil {
					t.Fatalf("OpenProducer = %v", err)
				}
				defer d.Close(true)
				id := newEntryID(t)
				n, err := d.Write(id, tinyOutput(4, 8, 0), map[string]string{"k": "v"})
				if err != nil {
					t.Fatalf("Write = %v", err)
				}
				syscall.Umask(old)
				inst := filepath.Join(root, testInstanceID)
				for _, c := range []struct {
					path string
					want fs.FileMode
				}{
					{root, pre.want},
					{inst, fs.ModeDir | 0o700},
					{filepath.Join(inst, "hmac.key"), 0o600},
					{filepath.Join(inst, "lock"), 0o600},
					{filepath.Join(inst, id+".safetensors"), 0o600},
				} {
					info, err := os.Lstat(c.path)
					if err != nil {
						t.Fatalf("Lstat(%s) = %v", c.path, err)
					}
					if info.Mode() != c.want {
						t.Errorf("mode of %s = %v, want %v", c.path, info.Mode(), c.want)
					}
					if c.want == 0o600 && strings.HasSuffix(c.path, ".safetensors") && info.Size() != n {
						t.Errorf("Write returned %d bytes, file has %d", n, info.Size())
					}
				}
				key, err := os.ReadFile(filepath.Join(inst, "hmac.key"))
				if err != nil || len(key) != 32 || !bytes.Equal(key, d.Key()) {
					t.Fatalf("hmac.key = %x, %v; want the 32 bytes of Key() %x", key, err, d.Key())
				}
				if got := dirNames(t, inst); !reflect.DeepEqual(got, []string{id + ".safetensors", "hmac.key", "lock"}) {
					t.Errorf("instance dir holds %q, want the entry, hmac.key and lock only", got)
				}
				if err := d.Close(true); err != nil {
					t.Fatal(err)
				}
				if info, err := os.Lstat(root); err != nil || info.Mode() != pre.want {
					t.Errorf("after Close root is %v, %v; want %v", info.Mode(), err, pre.want)
				}
			})
		}
	}
}

func TestKeyIsACopyAndRandom(t *testing.T) {
	d, root := newProducer(t)
	k := d.Key()
	k[0] ^= 0xff
	if bytes.Equal(k, d.Key()) {
		t.Fatal("Key() returned the Dir's own slice; want a copy")
	}
	d2, err := OpenProducer(OSFS{}, root, "11111111-2222-4333-8444-555555555555", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(d.Key(), d2.Key()) {
		t.Fatal("two producer instances got the same HMAC key")
	}
	// Deterministic randomness gives a deterministic key (the simulator's case).
	seeded := bytes.NewReader(bytes.Repeat([]byte{7}, 64))
	d3, err := OpenProducer(OSFS{}, root, "21111111-2222-4333-8444-555555555555", seeded)
	if err != nil || !bytes.Equal(d3.Key(), bytes.Repeat([]byte{7}, 32)) {
		t.Fatalf("OpenProducer(seeded) key = %x, %v; want 32 bytes of 7", d3.Key(), err)
	}
}

func TestOpenProducerExistingInstance(t *testing.T) {
	_, root := newProducer(t)
	if _, err := OpenProducer(OSFS{}, root, testInstanceID, rand.Reader); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("OpenProducer(same instance twice) = %v, want fs.ErrExist", err)
	}
}

func TestOpenProducerFailureLeavesNothing(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cache")
	tests := []struct{ name, op, prefix string }{
		{"key write fails", "Write", ".tmp-key-"},
		{"key fsync fails", "Sync", ".tmp-key-"},
		{"key rename fails", "Rename", ".tmp-key-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &hookFS{inner: OSFS{}, hook: hookOn(tc.op, tc.prefix)}
			if _, err := OpenProducer(h, root, testInstanceID, rand.Reader); !errors.Is(err, errInjected) {
				t.Fatalf("OpenProducer = %v, want the injected error", err)
			}
			if got := dirNames(t, root); len(got) != 0 {
				t.Fatalf("after a failed OpenProducer root holds %q, want nothing", got)
			}
		})
	}
	if _, err := OpenProducer(OSFS{}, root, testInstanceID, bytes.NewReader(make([]byte, 10))); err == nil {
		t.Fatal("OpenProducer with 10 random bytes = nil error, want an error")
	}
	if got := dirNames(t, root); len(got) != 0 {
		t.Fatalf("after a failed OpenProducer root holds %q, want nothing", got)
	}
}

func TestLoadProducerKey(t *testing.T) {
	d, root := newProducer(t)
	key, err := LoadProducerKey(OSFS{}, root, testInstanceID)
	if err != nil || !bytes.Equal(key, d.Key()) {
		t.Fatalf("LoadProducerKey = %x, %v; want %x", key, err, d.Key())
	}
	other := "99999999-2222-4333-8444-555555555555"
	tests := []struct {
		name     string
		instance string
		setup    func(t *testing.T, keyPath string)
	}{
		{"missing instance", other, func(t *testing.T, keyPath string) {}},
		{"missing key", testInstanceID, func(t *testing.T, keyPath string) { must(t, os.Remove(keyPath)) }},
		{"key readable by others", testInstanceID, func(t *testing.T, keyPath string) { must(t, os.Chmod(keyPath, 0o644)) }},
		{"short key", testInstanceID, func(t *testing.T, keyPath string) { must(t, os.WriteFile(keyPath, make([]byte, 31), 0o600)) }},
		{"long key", testInstanceID, func(t *testing.T, keyPath string) { must(t, os.WriteFile(keyPath, make([]byte, 1<<20), 0o600)) }},
		{"key is a symlink", testInstanceID, func(t *testing.T, keyPath string) {
			target := filepath.Join(t.TempDir(), "k")
			must(t, os.WriteFile(target, make([]byte, 32), 0o600))
			must(t, os.Remove(keyPath))
			must(t, os.Symlink(target, keyPath))
		}},
		{"key is a directory", testInstanceID, func(t *testing.T, keyPath string) {
			must(t, os.Remove(keyPath))
			must(t, os.Mkdir(keyPath, 0o700))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, root := newProducer(t)
			tc.setup(t, filepath.Join(d.Path(), "hmac.key"))
			if k, err := LoadProducerKey(OSFS{}, root, tc.instance); !errors.Is(err, ErrUnknownProducer) {
				t.Fatalf("LoadProducerKey = %x, %v; want ErrUnknownProducer", k, err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriteClaimRoundTrip(t *testing.T) {
	d, root := newProducer(t)
	id := newEntryID(t)
	tensors := append(tinyOutput(8, 16, 5), Tensor{Name: "mask", DType: "U8", Shape: []int{8}, Data: []byte{1, 1, 1, 1, 1, 0, 0, 0}})
	md := map[string]string{"content_hash": strings.Repeat("0f", 32), "rows": "8"}
	n, err := d.Write(id, tensors, md)
	if err != nil {
		t.Fatalf("Write = %v", err)
	}
	if info, err := os.Stat(filepath.Join(d.Path(), id+".safetensors")); err != nil || info.Size() != n || n <= 8*16*4+8 {
		t.Errorf("Write returned %d bytes; file %v, %v; want the file size, above the %d data bytes", n, info, err, 8*16*4+8)
	}
	if ok, err := d.Exists(id); !ok || err != nil {
		t.Fatalf("Exists after Write = %v, %v; want true", ok, err)
	}
	if ids, err := d.List(); err != nil || !reflect.DeepEqual(ids, []string{id}) {
		t.Fatalf("List = %q, %v; want [%s]", ids, err, id)
	}
	got, gotMD, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, 1<<20)
	if err != nil {
		t.Fatalf("Claim = %v", err)
	}
	if !reflect.DeepEqual(gotMD, md) {
		t.Errorf("Claim metadata = %v, want %v", gotMD, md)
	}
	if !reflect.DeepEqual(got, tensors) {
		t.Errorf("Claim tensors = %+v, want %+v", got, tensors)
	}
	want, _ := tensors[0].Float32s()
	if vals, err := got[0].Float32s(); err != nil || !reflect.DeepEqual(vals, want) {
		t.Errorf("Claim values = %v, %v; want %v", vals, err, want)
	}
	if ok, err := d.Exists(id); ok || err != nil {
		t.Errorf("SU-1 Exists after Claim = %v, %v; want false (the producer learns of the claim)", ok, err)
	}
	if names := dirNames(t, d.Path()); !reflect.DeepEqual(names, instanceBaseFiles) {
		t.Errorf("after Claim the instance dir holds %q, want only hmac.key and lock", names)
	}
}

// TestSingleUseSequences: SU-1/SU-2/SU-3 on one entry, sequentially.
func TestSingleUseSequences(t *testing.T) {
	type step struct {
		op      string // "claim" or "remove"
		wantWin bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"SU-2 claim twice: the second is ErrGone", []step{{"claim", true}, {"claim", false}}},
		{"SU-3 remove after claim is false", []step{{"claim", true}, {"remove", false}}},
		{"SU-2 claim after remove is ErrGone", []step{{"remove", true}, {"claim", false}}},
		{"SU-3 remove twice: ABORTED then ALREADY_FINISHED", []step{{"remove", true}, {"remove", false}, {"claim", false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, root := newProducer(t)
			id := newEntryID(t)
			if _, err := d.Write(id, tinyOutput(2, 4, 0), nil); err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				switch s.op {
				case "claim":
					_, _, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, 1<<20)
					if s.wantWin && err != nil {
						t.Fatalf("step %d: Claim = %v, want success", i, err)
					}
					if !s.wantWin && (!errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "SU-2")) {
						t.Fatalf("step %d: Claim = %v, want ErrGone citing SU-2", i, err)
					}
				case "remove":
					removed, err := d.Remove(id)
					if err != nil || removed != s.wantWin {
						t.Fatalf("step %d: Remove = %v, %v; want %v, nil", i, removed, err, s.wantWin)
					}
				}
			}
			if names := dirNames(t, d.Path()); !reflect.DeepEqual(names, instanceBaseFiles) {
				t.Errorf("instance dir holds %q, want only hmac.key and lock", names)
			}
		})
	}
}

func TestClaimUnknownProducer(t *testing.T) {
	_, root := newProducer(t)
	_, _, err := Claim(OSFS{}, root, "99999999-2222-4333-8444-555555555555", newEntryID(t), rand.Reader, 1<<20)
	if !errors.Is(err, ErrUnknownProducer) {
		t.Fatalf("Claim(unknown producer) = %v, want ErrUnknownProducer", err)
	}
	if _, _, err := Claim(OSFS{}, root, testInstanceID, newEntryID(t), rand.Reader, 1<<20); !errors.Is(err, ErrGone) {
		t.Fatalf("Claim(never published entry) = %v, want ErrGone", err)
	}
	if _, _, err := Claim(OSFS{}, root, testInstanceID, newEntryID(t), rand.Reader, 0); err == nil || errors.Is(err, ErrGone) {
		t.Fatalf("Claim(maxBytes 0) = %v, want an argument error", err)
	}
}

// TestClaimTooLargeConsumesNothing: L-5 the bound is checked before the
// claiming rename, so the entry stays published.
func TestClaimTooLargeConsumesNothing(t *testing.T) {
	d, root := newProducer(t)
	id := newEntryID(t)
	n, err := d.Write(id, tinyOutput(4, 4, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, n-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Claim(maxBytes %d of %d) = %v, want ErrTooLarge", n-1, n, err)
	}
	if ok, _ := d.Exists(id); !ok {
		t.Fatal("L-5 an entry rejected as too large was consumed")
	}
	if _, _, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, n); err != nil {
		t.Fatalf("Claim(maxBytes == size) = %v, want success", err)
	}
}

// TestClaimSymlinkEntryConsumesNothing: SU-5 a planted link never makes a
// consumer read outside the cache.
func TestClaimSymlinkEntryConsumesNothing(t *testing.T) {
	d, root := newProducer(t)
	target := filepath.Join(t.TempDir(), "secret")
	b, _ := EncodeSafetensors(tinyOutput(1, 1, 0), map[string]string{"secret": "yes"})
	must(t, os.WriteFile(target, b, 0o600))
	id := newEntryID(t)
	link := filepath.Join(d.Path(), id+".safetensors")
	must(t, os.Symlink(target, link))
	ts, md, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, 1<<20)
	if !errors.Is(err, ErrBadSafetensors) {
		t.Fatalf("SU-5 Claim(symlink entry) = %v, %v, %v; want ErrBadSafetensors", ts, md, err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("the symlink entry was consumed: %v", err)
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the link target was touched: %v", err)
	}
}

// TestClaimCorruptEntry: a corrupt entry file is ErrBadSafetensors, and the
// claimed file is deleted all the same (the entry is spent).
func TestClaimCorruptEntry(t *testing.T) {
	valid, _ := EncodeSafetensors(tinyOutput(4, 4, 0), map[string]string{"k": "v"})
	hugeHeader := bytes.Clone(valid)
	hugeHeader[7] = 0x7f
	tests := []struct {
		name    string
		content []byte
	}{
		{"empty file", nil},
		{"truncated in the length", valid[:5]},
		{"truncated in the header", valid[:20]},
		{"truncated in the data", valid[:len(valid)-3]},
		{"header length huge", hugeHeader},
		{"garbage", bytes.Repeat([]byte("not safetensors "), 8)},
		{"trailing bytes", append(bytes.Clone(valid), 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, root := newProducer(t)
			id := newEntryID(t)
			must(t, os.WriteFile(filepath.Join(d.Path(), id+".safetensors"), tc.content, 0o600))
			ts, _, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, 1<<20)
			if !errors.Is(err, ErrBadSafetensors) || errors.Is(err, ErrCleanup) {
				t.Fatalf("Claim(corrupt) = %d tensors, %v; want ErrBadSafetensors alone", len(ts), err)
			}
			if names := dirNames(t, d.Path()); !reflect.DeepEqual(names, instanceBaseFiles) {
				t.Errorf("after claiming a corrupt entry the instance dir holds %q, want only hmac.key and lock", names)
			}
			if _, _, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, 1<<20); !errors.Is(err, ErrGone) {
				t.Errorf("SU-2 Claim after a corrupt claim = %v, want ErrGone", err)
			}
		})
	}
}

// TestClaimCleanupFailure: X-1 a failed delete of the claimed file is
// reported, never swallowed; the decoded entry still comes back.
func TestClaimCleanupFailure(t *testing.T) {
	for _, corrupt := range []bool{false, true} {
		t.Run(map[bool]string{false: "valid entry", true: "corrupt entry"}[corrupt], func(t *testing.T) {
			d, root := newProducer(t)
			id := newEntryID(t)
			if corrupt {
				must(t, os.WriteFile(filepath.Join(d.Path(), id+".safetensors"), []byte("garbage!"), 0o600))
			} else if _, err := d.Write(id, tinyOutput(2, 2, 0), nil); err != nil {
				t.Fatal(err)
			}
			h := &hookFS{inner: OSFS{}, hook: hookOn("Remove", ".claimed-")}
			ts, _, err := Claim(h, root, testInstanceID, id, rand.Reader, 1<<20)
			if !errors.Is(err, ErrCleanup) || !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "X-1") {
				t.Fatalf("X-1 Claim with a failing delete = %v, want ErrCleanup citing X-1", err)
			}
			if corrupt != errors.Is(err, ErrBadSafetensors) {
				t.Errorf("Claim = %v; ErrBadSafetensors joined = %v, want %v", err, !corrupt, corrupt)
			}
			if !corrupt && len(ts) != 1 {
				t.Errorf("Claim with only a cleanup failure returned %d tensors, want the entry's 1", len(ts))
			}
			if ok, _ := d.Exists(id); ok {
				t.Error("the entry is still published after a won claim")
			}
		})
	}
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	tests := []struct{ name, op, prefix string }{
		{"create fails", "OpenFile", ".tmp-"},
		{"chmod fails", "Chmod", ".tmp-"},
		{"write fails", "Write", ".tmp-"},
		{"fsync fails", "Sync", ".tmp-"},
		{"rename fails", "Rename", ".tmp-"},
		{"directory fsync fails", "SyncDir", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newProducer(t)
			d.fsys = &hookFS{inner: OSFS{}, hook: hookOn(tc.op, tc.prefix)}
			id := newEntryID(t)
			if _, err := d.Write(id, tinyOutput(2, 2, 0), nil); !errors.Is(err, errInjected) || errors.Is(err, ErrCleanup) {
				t.Fatalf("L-5 Write = %v, want the injected error alone", err)
			}
			if names := dirNames(t, d.Path()); !reflect.DeepEqual(names, instanceBaseFiles) {
				t.Errorf("L-5 after a failed Write the instance dir holds %q, want only hmac.key and lock", names)
			}
		})
	}
	t.Run("write and temp removal fail", func(t *testing.T) {
		d, _ := newProducer(t)
		w, r := hookOn("Write", ".tmp-"), hookOn("Remove", ".tmp-")
		d.fsys = &hookFS{inner: OSFS{}, hook: func(op, p string) error {
			if err := w(op, p); err != nil {
				return err
			}
			return r(op, p)
		}}
		if _, err := d.Write(newEntryID(t), tinyOutput(2, 2, 0), nil); !errors.Is(err, ErrCleanup) {
			t.Fatalf("X-1 Write with a failing temp removal = %v, want ErrCleanup", err)
		}
	})
}

func TestWriteRejects(t *testing.T) {
	d, _ := newProducer(t)
	id := newEntryID(t)
	if _, err := d.Write(id, []Tensor{F32Tensor("x", 2, 2, []float32{1})}, nil); !errors.Is(err, ErrBadSafetensors) {
		t.Fatalf("Write(bad tensor) = %v, want ErrBadSafetensors", err)
	}
	if _, err := d.Write(id, tinyOutput(1, 1, 0), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write(id, tinyOutput(1, 1, 1), nil); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("SU-6 Write(existing id) = %v, want fs.ErrExist", err)
	}
	if names := dirNames(t, d.Path()); len(names) != 3 {
		t.Errorf("instance dir holds %q, want the entry, hmac.key and lock", names)
	}
}

func TestListIgnoresOtherFiles(t *testing.T) {
	d, _ := newProducer(t)
	a, b := "a"+strings.Repeat("0", 31), "b"+strings.Repeat("0", 31)
	for _, id := range []string{b, a} {
		if _, err := d.Write(id, tinyOutput(1, 1, 0), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{".tmp-" + a + "-0123456789abcdef", ".claimed-" + b + "-0123456789abcdef", "README", strings.ToUpper(a) + ".safetensors"} {
		must(t, os.WriteFile(filepath.Join(d.Path(), name), nil, 0o600))
	}
	if ids, err := d.List(); err != nil || !reflect.DeepEqual(ids, []string{a, b}) {
		t.Fatalf("List = %q, %v; want [%s %s]", ids, err, a, b)
	}
}

func TestRemoveFailures(t *testing.T) {
	t.Run("rename fails: not released", func(t *testing.T) {
		d, _ := newProducer(t)
		id := newEntryID(t)
		if _, err := d.Write(id, tinyOutput(1, 1, 0), nil); err != nil {
			t.Fatal(err)
		}
		d.fsys = &hookFS{inner: OSFS{}, hook: hookOn("Rename", id)}
		if removed, err := d.Remove(id); removed || !errors.Is(err, ErrCleanup) {
			t.Fatalf("X-1 Remove with a failing rename = %v, %v; want false, ErrCleanup", removed, err)
		}
		d.fsys = OSFS{}
		if ok, _ := d.Exists(id); !ok {
			t.Fatal("the entry vanished although its release failed")
		}
	})
	t.Run("delete fails: released, reported", func(t *testing.T) {
		d, _ := newProducer(t)
		id := newEntryID(t)
		if _, err := d.Write(id, tinyOutput(1, 1, 0), nil); err != nil {
			t.Fatal(err)
		}
		d.fsys = &hookFS{inner: OSFS{}, hook: hookOn("Remove", ".claimed-")}
		if removed, err := d.Remove(id); !removed || !errors.Is(err, ErrCleanup) {
			t.Fatalf("X-1 Remove with a failing delete = %v, %v; want true, ErrCleanup", removed, err)
		}
	})
}

func TestCloseRemovesEverything(t *testing.T) {
	d, root := newProducer(t)
	other, err := OpenProducer(OSFS{}, root, "11111111-2222-4333-8444-555555555555", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherID := newEntryID(t)
	if _, err := other.Write(otherID, tinyOutput(1, 1, 0), nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := d.Write(newEntryID(t), tinyOutput(2, 2, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	id := newEntryID(t)
	must(t, os.WriteFile(filepath.Join(d.Path(), ".tmp-"+id+"-0123456789abcdef"), []byte("partial"), 0o600))
	must(t, os.WriteFile(filepath.Join(d.Path(), ".claimed-"+id+"-0123456789abcdef"), []byte("claimed"), 0o600))
	before := tree(t, other.Path())

	if err := d.Close(true); err != nil {
		t.Fatalf("S-4 Close(true) = %v", err)
	}
	if names := dirNames(t, root); !reflect.DeepEqual(names, []string{other.InstanceID()}) {
		t.Errorf("S-4 after Close(true) root holds %q, want only the other instance", names)
	}
	if after := tree(t, other.Path()); !reflect.DeepEqual(before, after) {
		t.Errorf("Close touched another instance: before %q after %q", before, after)
	}
	if _, err := d.Write(newEntryID(t), tinyOutput(1, 1, 0), nil); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("Write after Close = %v, want fs.ErrClosed", err)
	}
	for name, f := range map[string]func() error{
		"Remove":         func() error { _, err := d.Remove(id); return err },
		"Exists":         func() error { _, err := d.Exists(id); return err },
		"List":           func() error { _, err := d.List(); return err },
		"CollectOrphans": func() error { _, err := d.CollectOrphans(0, 0); return err },
	} {
		if err := f(); !errors.Is(err, fs.ErrClosed) {
			t.Errorf("%s after Close = %v, want fs.ErrClosed", name, err)
		}
	}
	if err := d.Close(true); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if _, err := LoadProducerKey(OSFS{}, root, testInstanceID); !errors.Is(err, ErrUnknownProducer) {
		t.Errorf("LoadProducerKey after Close(true) = %v, want ErrUnknownProducer", err)
	}
	if _, _, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, 1<<20); !errors.Is(err, ErrUnknownProducer) {
		t.Errorf("Claim after Close(true) = %v, want ErrUnknownProducer", err)
	}
}

func TestCloseWithoutRemoveKeepsFiles(t *testing.T) {
	d, root := newProducer(t)
	id := newEntryID(t)
	if _, err := d.Write(id, tinyOutput(1, 1, 0), nil); err != nil {
		t.Fatal(err)
	}
	before := tree(t, root)
	if err := d.Close(false); err != nil {
		t.Fatalf("Close(false) = %v", err)
	}
	if after := tree(t, root); !reflect.DeepEqual(before, after) {
		t.Errorf("Close(false) changed the disk: before %q after %q", before, after)
	}
}

func TestCloseReportsFailures(t *testing.T) {
	d, _ := newProducer(t)
	if _, err := d.Write(newEntryID(t), tinyOutput(1, 1, 0), nil); err != nil {
		t.Fatal(err)
	}
	d.fsys = &hookFS{inner: OSFS{}, hook: hookOn("Remove", "hmac.key")}
	err := d.Close(true)
	if !errors.Is(err, ErrCleanup) || !errors.Is(err, errInjected) {
		t.Fatalf("S-4 Close(true) with a failing key delete = %v, want ErrCleanup", err)
	}
}

// TestClaimRefusesFIFO: a FIFO planted under an entry's name is refused at
// once instead of blocking the consumer in open(2) (found by an attack run).
func TestClaimRefusesFIFO(t *testing.T) {
	root := t.TempDir()
	d, err := OpenProducer(OSFS{}, root, testInstanceID, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("c", 32)
	if err := syscall.Mkfifo(filepath.Join(d.Path(), id+".safetensors"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, 1<<20)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Claim of a FIFO succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Claim blocked on a FIFO")
	}
}

// TestDirPathCache: the paths a Dir keeps are its entries' own, and go
// when it removes an entry or sees it claimed.
func TestDirPathCache(t *testing.T) {
	d, root := newProducer(t)
	a, b := newEntryID(t), newEntryID(t)
	for _, id := range []string{a, b} {
		if _, err := d.Write(id, tinyOutput(1, 2, 1), nil); err != nil {
			t.Fatal(err)
		}
		if got, want := d.paths[id], filepath.Join(d.Path(), id+".safetensors"); got != want {
			t.Fatalf("cached path of %s = %q, want %q", id, got, want)
		}
	}
	if removed, err := d.Remove(a); !removed || err != nil {
		t.Fatalf("Remove = %v, %v", removed, err)
	}
	if _, ok := d.paths[a]; ok {
		t.Fatalf("path of removed %s still cached", a)
	}
	if _, _, err := Claim(OSFS{}, root, d.InstanceID(), b, rand.Reader, 1<<20); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Exists(b); ok || err != nil {
		t.Fatalf("Exists of claimed = %v, %v", ok, err)
	}
	if len(d.paths) != 0 {
		t.Fatalf("paths left: %v", d.paths)
	}
}
