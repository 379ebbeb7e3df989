package shareddir

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// testInstanceID is a well-formed producer instance id for tests.
const testInstanceID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"

// hookFS wraps an FS: every call is recorded as "op path" and first passes
// through hook (if set), which may act on the disk (make a file vanish) or
// return an error to inject instead of performing the call.
type hookFS struct {
	inner FS
	hook  func(op, path string) error

	mu    sync.Mutex
	calls []string
}

var _ FS = (*hookFS)(nil)

func (h *hookFS) before(op, path string) error {
	h.mu.Lock()
	h.calls = append(h.calls, op+" "+path)
	h.mu.Unlock()
	if h.hook != nil {
		return h.hook(op, path)
	}
	return nil
}

func (h *hookFS) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

func (h *hookFS) MkdirAll(p string, perm fs.FileMode) error {
	if err := h.before("MkdirAll", p); err != nil {
		return err
	}
	return h.inner.MkdirAll(p, perm)
}

func (h *hookFS) Mkdir(p string, perm fs.FileMode) error {
	if err := h.before("Mkdir", p); err != nil {
		return err
	}
	return h.inner.Mkdir(p, perm)
}

func (h *hookFS) OpenFile(p string, flag int, perm fs.FileMode) (File, error) {
	if err := h.before("OpenFile", p); err != nil {
		return nil, err
	}
	f, err := h.inner.OpenFile(p, flag, perm)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, fs: h, path: p}, nil
}

func (h *hookFS) Rename(o, n string) error {
	if err := h.before("Rename", o+" -> "+n); err != nil {
		return err
	}
	return h.inner.Rename(o, n)
}

func (h *hookFS) Remove(p string) error {
	if err := h.before("Remove", p); err != nil {
		return err
	}
	return h.inner.Remove(p)
}

func (h *hookFS) ReadFile(p string) ([]byte, error) {
	if err := h.before("ReadFile", p); err != nil {
		return nil, err
	}
	return h.inner.ReadFile(p)
}

func (h *hookFS) ReadDir(p string) ([]fs.DirEntry, error) {
	if err := h.before("ReadDir", p); err != nil {
		return nil, err
	}
	return h.inner.ReadDir(p)
}

func (h *hookFS) Lstat(p string) (fs.FileInfo, error) {
	if err := h.before("Lstat", p); err != nil {
		return nil, err
	}
	return h.inner.Lstat(p)
}

func (h *hookFS) Chmod(p string, m fs.FileMode) error {
	if err := h.before("Chmod", p); err != nil {
		return err
	}
	return h.inner.Chmod(p, m)
}

func (h *hookFS) SyncDir(p string) error {
	if err := h.before("SyncDir", p); err != nil {
		return err
	}
	return h.inner.SyncDir(p)
}

func (h *hookFS) TryLock(p string, create bool, perm fs.FileMode) (FileLock, error) {
	if err := h.before("TryLock", p); err != nil {
		return nil, err
	}
	return h.inner.TryLock(p, create, perm)
}

// hookFile passes Write and Sync of an open file through the hook too.
type hookFile struct {
	File
	fs   *hookFS
	path string
}

func (f *hookFile) Write(b []byte) (int, error) {
	if err := f.fs.before("Write", f.path); err != nil {
		return 0, err
	}
	return f.File.Write(b)
}

func (f *hookFile) Sync() error {
	if err := f.fs.before("Sync", f.path); err != nil {
		return err
	}
	return f.File.Sync()
}

// errInjected is the error hooks inject.
var errInjected = errors.New("injected failure")

// hookOn returns a hook that injects errInjected for op on paths whose base
// name starts with prefix.
func hookOn(op, prefix string) func(string, string) error {
	return func(o, p string) error {
		if o != op {
			return nil
		}
		if op == "Rename" { // "old -> new": match the old path
			p, _, _ = strings.Cut(p, " -> ")
		}
		if strings.HasPrefix(filepath.Base(p), prefix) {
			return fmt.Errorf("%s %s: %w", o, p, errInjected)
		}
		return nil
	}
}

// newProducer opens a producer under a fresh temp root.
func newProducer(t testing.TB) (*Dir, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "cache")
	d, err := OpenProducer(OSFS{}, root, testInstanceID, rand.Reader)
	if err != nil {
		t.Fatalf("OpenProducer(%s) = %v", root, err)
	}
	return d, root
}

// newEntryID returns a fresh entry id.
func newEntryID(t testing.TB) string {
	t.Helper()
	id, err := NewEntryID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// tinyOutput is a small encoder output: F32 [rows, cols] with values
// (i*cols+j+seed)/4, exactly representable so sums are exact.
func tinyOutput(rows, cols int, seed int) []Tensor {
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(i+seed) / 4
	}
	return []Tensor{F32Tensor("embeddings", rows, cols, v)}
}

// tree returns "relpath mode size" for everything under root, sorted.
func tree(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		size := info.Size()
		if info.IsDir() {
			size = 0
		}
		out = append(out, fmt.Sprintf("%s %v %d", rel, info.Mode(), size))
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("walk %s: %v", root, err)
	}
	sort.Strings(out)
	return out
}

// dirNames lists the names in dir, sorted.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir(%s) = %v", dir, err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// instanceBaseFiles is what an instance directory holds with no entry and
// no temp or claimed file: the key and the instance lock.
var instanceBaseFiles = []string{"hmac.key", "lock"}
