package shareddir

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"
)

const (
	envOrphanChild = "BATON_SHAREDDIR_ORPHAN_CHILD"
	envOrphanRoot  = "BATON_SHAREDDIR_ORPHAN_ROOT"
	envOrphanID    = "BATON_SHAREDDIR_ORPHAN_ID"
)

// TestOrphanProducerChildProcess is a producer process for
// TestOrphanInstancesOfKilledProducers: it opens its instance, publishes
// one entry, says READY and lives until its stdin closes or it is killed.
func TestOrphanProducerChildProcess(t *testing.T) {
	if os.Getenv(envOrphanChild) != "1" {
		t.Skip("only runs as a child process of TestOrphanInstancesOfKilledProducers")
	}
	d, err := OpenProducer(OSFS{}, os.Getenv(envOrphanRoot), os.Getenv(envOrphanID), rand.Reader)
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	id, _ := NewEntryID(rand.Reader)
	if _, err := d.Write(id, tinyOutput(2, 2, 0), nil); err != nil {
		fmt.Println("ERROR", err)
		return
	}
	fmt.Println("READY")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
	}
}

// startOrphanProducer starts a producer child process for instance id under root.
func startOrphanProducer(t *testing.T, root, id string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanProducerChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envOrphanChild+"=1", envOrphanRoot+"="+root, envOrphanID+"="+id)
	cmd.Stderr = os.Stderr
	if _, err := cmd.StdinPipe(); err != nil { // held open: the child lives until killed
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start producer child: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if l := sc.Text(); l == "READY" {
			return cmd
		} else if len(l) > 5 && l[:5] == "ERROR" {
			t.Fatalf("producer child %s: %s", id, l)
		}
	}
	t.Fatalf("producer child %s exited before READY", id)
	return nil
}

func killChild(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // "signal: killed"
}

// TestOrphanInstancesOfKilledProducers: a producer killed with SIGKILL
// leaves its directory (entry, key, lock); the next producer's sweep
// removes it, and never touches a live producer's directory, a young
// directory without a lock, or anything that is not an instance directory.
func TestOrphanInstancesOfKilledProducers(t *testing.T) {
	if os.Getenv(envOrphanChild) == "1" {
		t.Skip("inside a child")
	}
	root := filepath.Join(t.TempDir(), "cache")
	const deadID, liveID = "11111111-2222-4333-8444-555555555555", "66666666-7777-4888-9999-aaaaaaaaaaaa"
	dead := startOrphanProducer(t, root, deadID)
	live := startOrphanProducer(t, root, liveID)
	killChild(t, dead)
	deadDir, liveDir := filepath.Join(root, deadID), filepath.Join(root, liveID)
	if got := dirNames(t, deadDir); len(got) != 3 {
		t.Fatalf("killed producer left %q, want its entry, hmac.key and lock", got)
	}
	// Not instance directories, or too young to judge: never touched.
	young := filepath.Join(root, "77777777-8888-4999-aaaa-bbbbbbbbbbbb")
	old := filepath.Join(root, "88888888-9999-4aaa-bbbb-cccccccccccc")
	other := filepath.Join(root, "not-an-instance")
	link := filepath.Join(root, "99999999-aaaa-4bbb-cccc-dddddddddddd")
	for _, d := range []string{young, old, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "hmac.key"), make([]byte, 32), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(liveDir, link); err != nil {
		t.Fatal(err)
	}
	longAgo := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(old, longAgo, longAgo); err != nil {
		t.Fatal(err)
	}
	liveBefore := tree(t, liveDir)

	d, err := OpenProducer(OSFS{}, root, testInstanceID, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(true)
	now := time.Now().UnixMilli()
	removed, err := d.SweepDeadInstances(now)
	if err != nil || removed != 2 {
		t.Fatalf("SweepDeadInstances = %d, %v; want 2 (the killed producer's and the old lock-less directory)", removed, err)
	}
	for _, gone := range []string{deadDir, old} {
		if _, err := os.Lstat(gone); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there after the sweep (%v)", filepath.Base(gone), err)
		}
	}
	for _, kept := range []string{young, other, link} {
		if _, err := os.Lstat(kept); err != nil {
			t.Errorf("the sweep removed %s: %v", filepath.Base(kept), err)
		}
	}
	if got := tree(t, liveDir); !reflect.DeepEqual(got, liveBefore) {
		t.Errorf("the sweep changed a live producer's directory:\nbefore %q\nafter  %q", liveBefore, got)
	}
	if _, err := os.Lstat(d.Path()); err != nil {
		t.Errorf("the sweep removed its own directory: %v", err)
	}

	// The live one dies too: the next sweep (not before SweepIntervalMs) removes it.
	killChild(t, live)
	if n, err := d.SweepDeadInstances(now + SweepIntervalMs - 1); n != 0 || err != nil {
		t.Errorf("a sweep within SweepIntervalMs = %d, %v; want 0, nil (throttled)", n, err)
	}
	if n, err := d.SweepDeadInstances(now + SweepIntervalMs); n != 1 || err != nil {
		t.Errorf("the sweep after the second kill = %d, %v; want 1", n, err)
	}
	if _, err := os.Lstat(liveDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the killed second producer's directory is still there (%v)", err)
	}
}

// TestOrphanInstanceLiveInProcess: flock is per open file description, so
// another producer of the same process is alive to the sweep too; after its
// Close(false) (files kept, lock released) it is dead.
func TestOrphanInstanceLiveInProcess(t *testing.T) {
	d, root := newProducer(t)
	defer d.Close(true)
	other, err := OpenProducer(OSFS{}, root, "0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.SweepDeadInstances(0); n != 0 || err != nil {
		t.Fatalf("sweep with a live sibling = %d, %v", n, err)
	}
	if err := other.Close(false); err != nil {
		t.Fatal(err)
	}
	if n, err := d.SweepDeadInstances(SweepIntervalMs); n != 1 || err != nil {
		t.Fatalf("sweep after the sibling closed = %d, %v; want 1", n, err)
	}
	if got := dirNames(t, root); !reflect.DeepEqual(got, []string{testInstanceID}) {
		t.Errorf("root holds %q", got)
	}
	if _, err := other.SweepDeadInstances(0); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("sweep after Close = %v, want fs.ErrClosed", err)
	}
}

// TestOrphanSweepBounded: one sweep removes at most SweepMaxDirs directories.
func TestOrphanSweepBounded(t *testing.T) {
	d, root := newProducer(t)
	defer d.Close(true)
	longAgo := time.Now().Add(-2 * time.Minute)
	const n = SweepMaxDirs + 4
	for i := 0; i < n; i++ {
		p := filepath.Join(root, fmt.Sprintf("%08x-0000-4000-8000-000000000000", i))
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, longAgo, longAgo); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	if got, err := d.SweepDeadInstances(now); got != SweepMaxDirs || err != nil {
		t.Fatalf("first sweep = %d, %v; want %d", got, err, SweepMaxDirs)
	}
	if got, err := d.SweepDeadInstances(now + SweepIntervalMs); got != n-SweepMaxDirs || err != nil {
		t.Fatalf("second sweep = %d, %v; want %d", got, err, n-SweepMaxDirs)
	}
}

// TestOrphanSweepFailureIsReported: a dead directory that cannot be emptied
// (a subdirectory in it) is reported and kept with its lock, for the next
// sweep; its lock file is removed only after everything else.
func TestOrphanSweepFailureIsReported(t *testing.T) {
	d, root := newProducer(t)
	defer d.Close(true)
	dead := filepath.Join(root, "12345678-1234-4234-8234-123456789abc")
	if err := os.MkdirAll(filepath.Join(dead, "sub", "deeper"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := d.SweepDeadInstances(time.Now().UnixMilli())
	if n != 0 || err == nil {
		t.Fatalf("sweep = %d, %v; want 0 and an error", n, err)
	}
	if got := dirNames(t, dead); !reflect.DeepEqual(got, []string{"lock", "sub"}) {
		t.Errorf("after a failed sweep the dead dir holds %q, want lock and sub", got)
	}
}
