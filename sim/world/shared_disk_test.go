package world

import (
	"bytes"
	"strings"
	"testing"
)

// TestSharedDiskInterleavingsDeterministic: for each interleaving the
// shared disk injects into the real shareddir calls (a removal or another
// consumer's Claim inside a Claim, a consumer dying inside its Claim, E
// dying inside Write's fsync), a seed of 1..3000 that reaches it passes and
// gives a byte-identical trace when run again.
func TestSharedDiskInterleavingsDeterministic(t *testing.T) {
	notes := []string{"landed inside the claim", "arrived inside PD", "died inside its Claim", "unsynced "}
	found := map[string]uint64{}
	for seed := uint64(1); seed <= 3000 && len(found) < len(notes); seed++ {
		s := DrawSettings(seed)
		if s.Backend != BackendSharedDir {
			continue
		}
		var a bytes.Buffer
		r := Run(seed, s, Options{Trace: &a})
		hit := false
		for _, n := range notes {
			if _, ok := found[n]; !ok && strings.Contains(a.String(), n) {
				found[n], hit = seed, true
			}
		}
		if !hit {
			continue
		}
		if r.Verdict != Passed {
			t.Errorf("seed %d: %v %s", seed, r.Verdict, r.Failure)
		}
		var b bytes.Buffer
		Run(seed, s, Options{Trace: &b})
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("seed %d: traces differ (%d, %d bytes)", seed, a.Len(), b.Len())
		}
	}
	for _, n := range notes {
		if _, ok := found[n]; !ok {
			t.Errorf("no seed of 1..3000 reached %q", n)
		}
	}
	t.Logf("seeds: %v", found)
}

// TestClaimingIsEntry holds claiming.isEntry to its definition: path ==
// EntryPath(instance, id).
func TestClaimingIsEntry(t *testing.T) {
	const inst, id = "0123abcd-0000-4000-8000-00000000cafe", "0123456789abcdef0123456789abcdef"
	paths := []string{
		EntryPath(inst, id), EntryPath(inst, id) + "x", EntryPath(inst, id+"0"), EntryPath(inst+"0", id),
		CacheRoot + "/" + inst + "/" + id, CacheRoot + "/" + inst + id + ".safetensors", CacheRoot + inst + "/" + id + ".safetensors",
		CacheRoot + "//" + inst + "/" + id + ".safetensors", "/var/cache/" + inst + "/" + id + ".safetensors", "", "/",
	}
	for _, c := range []claiming{{instance: inst, id: id}, {instance: "", id: id}, {instance: inst, id: ""}, {instance: "..", id: id}, {instance: inst, id: "a/b"}, {instance: ".", id: "."}} {
		for _, p := range append(paths, EntryPath(c.instance, c.id)) {
			if got, want := c.isEntry(p), p == EntryPath(c.instance, c.id); got != want {
				t.Errorf("claiming{%q, %q}.isEntry(%q) = %v, want %v", c.instance, c.id, p, got, want)
			}
		}
	}
}
