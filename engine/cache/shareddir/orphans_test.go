package shareddir

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// X-2 collection removes stale temp and claimed files only.
func TestCollectOrphansByAge(t *testing.T) {
	d, _ := newProducer(t)
	entry := newEntryID(t)
	if _, err := d.Write(entry, tinyOutput(1, 1, 0), nil); err != nil {
		t.Fatal(err)
	}
	id := newEntryID(t)
	nowMs := int64(1_800_000_000_000)
	files := []struct {
		name     string
		ageMs    int64
		wantGone bool
	}{
		{".tmp-" + id + "-0000000000000001", 60_000, true},
		{".tmp-" + id + "-0000000000000002", 59_999, false},
		{".tmp-key-0000000000000003", 120_000, true},
		{".claimed-" + id + "-0000000000000004", 60_000, true},
		{".claimed-" + id + "-0000000000000005", 10, false},
		{"README", 1e9, false},
		{".tmp-unknown", 1e9, false},
		{entry + ".safetensors", 1e9, false}, // entries expire through the table, not here
		{"hmac.key", 1e9, false},
	}
	for _, f := range files {
		p := filepath.Join(d.Path(), f.name)
		if _, err := os.Stat(p); err != nil {
			must(t, os.WriteFile(p, []byte("x"), 0o600))
		}
		mt := time.UnixMilli(nowMs - f.ageMs)
		must(t, os.Chtimes(p, mt, mt))
	}
	removed, err := d.CollectOrphans(60_000, nowMs)
	if err != nil || removed != 3 {
		t.Fatalf("X-2 CollectOrphans = %d, %v; want 3, nil", removed, err)
	}
	for _, f := range files {
		_, err := os.Lstat(filepath.Join(d.Path(), f.name))
		if gone := os.IsNotExist(err); gone != f.wantGone {
			t.Errorf("X-2 %s (age %d ms): gone = %v, want %v", f.name, f.ageMs, gone, f.wantGone)
		}
	}
}

// TestCollectOrphansToleratesVanishing: X-2 files that vanish between the
// listing and the stat, or between the stat and the delete, are skipped
// without error; other failures are ErrCleanup and the rest is still collected.
func TestCollectOrphansToleratesVanishing(t *testing.T) {
	d, _ := newProducer(t)
	id := newEntryID(t)
	names := []string{
		".claimed-" + id + "-0000000000000001", // vanishes before Lstat
		".claimed-" + id + "-0000000000000002", // vanishes before Remove
		".tmp-" + id + "-0000000000000003",     // collected normally
	}
	for _, n := range names {
		must(t, os.WriteFile(filepath.Join(d.Path(), n), nil, 0o600))
	}
	d.fsys = &hookFS{inner: OSFS{}, hook: func(op, p string) error {
		base := filepath.Base(p)
		if (op == "Lstat" && base == names[0]) || (op == "Remove" && base == names[1]) {
			if err := os.Remove(p); err != nil { // another process got there first
				t.Errorf("simulate vanishing %s: %v", base, err)
			}
		}
		return nil
	}}
	removed, err := d.CollectOrphans(0, time.Now().UnixMilli()+1000)
	if err != nil || removed != 1 {
		t.Fatalf("X-2 CollectOrphans with vanishing files = %d, %v; want 1, nil", removed, err)
	}
	if got := dirNames(t, d.Path()); !reflect.DeepEqual(got, instanceBaseFiles) {
		t.Errorf("after collection the dir holds %q", got)
	}

	// A failure other than "not found" is reported, and collection goes on.
	for _, n := range names {
		must(t, os.WriteFile(filepath.Join(d.Path(), n), nil, 0o600))
	}
	d.fsys = &hookFS{inner: OSFS{}, hook: hookOn("Remove", names[0])}
	removed, err = d.CollectOrphans(0, time.Now().UnixMilli()+1000)
	if !errors.Is(err, ErrCleanup) || !strings.Contains(err.Error(), names[0]) || removed != 2 {
		t.Fatalf("X-1 CollectOrphans with a failing delete = %d, %v; want 2 and ErrCleanup naming %s", removed, err, names[0])
	}
}

// TestCollectOrphansConcurrentClaims: X-2 with real concurrency: consumers
// claim entries (creating and deleting .claimed- files) while the producer
// collects with a zero age bound, deleting claimed files under the
// consumers' feet. Every claim still succeeds exactly once, with its data.
func TestCollectOrphansConcurrentClaims(t *testing.T) {
	d, root := newProducer(t)
	const entries = 120
	ids := make([]string, entries)
	for i := range ids {
		ids[i] = newEntryID(t)
		if _, err := d.Write(ids[i], tinyOutput(2, 2, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Backdate the entries: a claimed file keeps its entry's mtime.
	old := time.Now().Add(-time.Hour)
	for _, id := range ids {
		must(t, os.Chtimes(filepath.Join(d.Path(), id+".safetensors"), old, old))
	}
	done := make(chan struct{})
	var collectErr error
	var collected int
	collectorDone := make(chan struct{})
	go func() {
		defer close(collectorDone)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, err := d.CollectOrphans(0, time.Now().UnixMilli())
			collected += n
			if err != nil {
				collectErr = err
				return
			}
		}
	}()
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	const consumers = 3
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; i < entries; i += consumers {
				ts, _, err := Claim(OSFS{}, root, testInstanceID, ids[i], rand.Reader, 1<<20)
				if err == nil {
					var v []float32
					v, err = ts[0].Float32s()
					if err == nil && v[0] != float32(i)/4 {
						err = errors.New("wrong data")
					}
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, ids[i]+": "+err.Error())
					mu.Unlock()
				}
			}
		}(c)
	}
	wg.Wait() // the consumers
	close(done)
	<-collectorDone
	if collectErr != nil {
		t.Fatalf("X-2 CollectOrphans during claims = %v", collectErr)
	}
	sort.Strings(failures)
	if len(failures) != 0 {
		t.Fatalf("SU-1 claims racing the collector failed: %q", failures)
	}
	t.Logf("collector deleted %d claimed files under the consumers' feet", collected)
	if got := dirNames(t, d.Path()); !reflect.DeepEqual(got, instanceBaseFiles) {
		t.Errorf("after claims and collection the dir holds %q", got)
	}
}
