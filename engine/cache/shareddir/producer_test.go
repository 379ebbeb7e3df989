package shareddir

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStartProducerAndCollectSweep checks the producer's two sequences:
// StartProducer opens the instance and then sweeps a dead instance's
// directory (not with skipSweep), and Collect sweeps again once
// SweepIntervalMs has passed, after collecting orphans.
func TestStartProducerAndCollectSweep(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cache")
	dead := func(id string) string {
		t.Helper()
		dir := filepath.Join(root, id)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "x.safetensors"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	first := dead("00000000-0000-4000-8000-000000000001")
	now := time.Now().UnixMilli() + DeadInstanceGraceMs + 1000

	skipped, swept, err := StartProducer(OSFS{}, root, "00000000-0000-4000-8000-0000000000aa", rand.Reader, now, true)
	if err != nil || swept != (Swept{}) {
		t.Fatalf("StartProducer(skipSweep) = %v, %v; want nothing swept", swept, err)
	}
	if _, err := os.Stat(first); err != nil {
		t.Fatalf("skipSweep removed the dead instance: %v", err)
	}
	if err := skipped.Close(true); err != nil {
		t.Fatal(err)
	}

	d, swept, err := StartProducer(OSFS{}, root, testInstanceID, rand.Reader, now, false)
	if err != nil || swept.Removed != 1 || swept.Err != nil {
		t.Fatalf("StartProducer = %+v, %v; want the dead instance swept", swept, err)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatalf("the dead instance is still there: %v", err)
	}
	second := dead("00000000-0000-4000-8000-000000000002")
	if _, swept, err := d.Collect(now+1, false); err != nil || swept.Removed != 0 {
		t.Fatalf("Collect within SweepIntervalMs = %+v, %v; want the sweep throttled", swept, err)
	}
	if _, swept, err := d.Collect(now+SweepIntervalMs, true); err != nil || swept.Removed != 0 {
		t.Fatalf("Collect(skipSweep) = %+v, %v; want no sweep", swept, err)
	}
	if _, swept, err := d.Collect(now+SweepIntervalMs, false); err != nil || swept.Removed != 1 {
		t.Fatalf("Collect = %+v, %v; want the second dead instance swept", swept, err)
	}
	if _, err := os.Stat(second); !os.IsNotExist(err) {
		t.Fatalf("the second dead instance is still there: %v", err)
	}
}
