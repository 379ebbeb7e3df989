package world

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestShardPartsTileTheRange: for every n, the shards' blocks are
// disjoint, in index order, contiguous, differ in size by at most one, and
// their union is exactly the range (also near 2^64 and with more shards
// than seeds).
func TestShardPartsTileTheRange(t *testing.T) {
	ranges := [][2]uint64{{1, 1}, {1, 2}, {1, 10}, {1, 10000}, {7, 1000003}, {0, 0}, {math.MaxUint64 - 9, math.MaxUint64}, {1 << 40, 1<<40 + 99}}
	for _, rg := range ranges {
		for _, n := range []int{1, 2, 3, 4, 7, 16, 100, 1000} {
			next, size := rg[0], uint64(0)
			minSize, maxSize := uint64(math.MaxUint64), uint64(0)
			for i := 0; i < n; i++ {
				a, b, ok := Shard{Index: i, Count: n}.Part(rg[0], rg[1])
				if !ok {
					minSize = 0
					continue
				}
				if a != next || b < a || b > rg[1] {
					t.Fatalf("range %d..%d, shard %d/%d = %d..%d, want it to start at %d", rg[0], rg[1], i, n, a, b, next)
				}
				size += b - a + 1
				minSize, maxSize = min(minSize, b-a+1), max(maxSize, b-a+1)
				next = b + 1
			}
			if size != rg[1]-rg[0]+1 || maxSize-minSize > 1 {
				t.Errorf("range %d..%d in %d shards: %d seeds covered (block sizes %d..%d)", rg[0], rg[1], n, size, minSize, maxSize)
			}
		}
	}
	if a, b, ok := (Shard{Index: 2, Count: 4}).Part(1, 1000); !ok || a != 501 || b != 750 {
		t.Errorf("shard 2/4 of 1..1000 = %d..%d %v, want 501..750", a, b, ok)
	}
	if _, _, ok := (Shard{}).Part(5, 4); ok {
		t.Error("an empty range has a part")
	}
}

// TestParseShardMalformed: only "i/n" with 0 <= i < n <= MaxShards.
func TestParseShardMalformed(t *testing.T) {
	for _, s := range []string{"", "1", "/", "1/", "/4", "4/4", "5/4", "-1/4", "1/0", "0/0", "+1/4", " 1/4", "1/4 ", "1/4/5", "a/b", "0x1/4", "0/100001", "1/99999999999"} {
		if _, err := ParseShard(s); !errors.Is(err, ErrBadShard) {
			t.Errorf("ParseShard(%q) = %v, want ErrBadShard", s, err)
		}
	}
	for s, want := range map[string]Shard{"0/1": {0, 1}, "3/4": {3, 4}, "099/100": {99, 100}} {
		if got, err := ParseShard(s); err != nil || got != want {
			t.Errorf("ParseShard(%q) = %v, %v, want %v", s, got, err, want)
		}
	}
}

// TestShardFromEnvironment: --shard wins; JOB_COMPLETION_INDEX takes its
// count from --shards or BATON_SHARDS; a count without an index, an index
// without a count, or one out of range is an error naming the variable.
func TestShardFromEnvironment(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	good := []struct {
		spec   string
		count  int
		lookup func(string) (string, bool)
		want   Shard
	}{
		{"", 0, env(), Shard{0, 1}},
		{"2/5", 0, env(EnvJobCompletionIndex, "1", EnvShards, "3"), Shard{2, 5}},
		{"", 0, env(EnvJobCompletionIndex, "3", EnvShards, "4"), Shard{3, 4}},
		{"", 8, env(EnvJobCompletionIndex, "7", EnvShards, "4"), Shard{7, 8}},
		{"", 0, env(EnvJobCompletionIndex, "", EnvShards, ""), Shard{0, 1}},
	}
	for _, tc := range good {
		if got, err := ShardFrom(tc.spec, tc.count, tc.lookup); err != nil || got != tc.want {
			t.Errorf("ShardFrom(%q, %d) = %v, %v, want %v", tc.spec, tc.count, got, err, tc.want)
		}
	}
	bad := []struct {
		spec   string
		count  int
		lookup func(string) (string, bool)
		names  string
	}{
		{"1/4", 4, env(), "--shards"},
		{"", 0, env(EnvShards, "4"), EnvJobCompletionIndex},
		{"", 4, env(), EnvJobCompletionIndex},
		{"", 0, env(EnvJobCompletionIndex, "1"), EnvShards},
		{"", 0, env(EnvJobCompletionIndex, "4", EnvShards, "4"), EnvJobCompletionIndex},
		{"", 0, env(EnvJobCompletionIndex, "x", EnvShards, "4"), EnvJobCompletionIndex},
		{"", 0, env(EnvJobCompletionIndex, "1", EnvShards, "-4"), EnvShards},
	}
	for _, tc := range bad {
		_, err := ShardFrom(tc.spec, tc.count, tc.lookup)
		if !errors.Is(err, ErrBadShard) || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("ShardFrom(%q, %d) = %v, want ErrBadShard naming %s", tc.spec, tc.count, err, tc.names)
		}
	}
}

// FuzzParseShard: never panics; what it accepts prints back the same way
// (modulo leading zeros) and validates.
func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"0/1", "3/4", "4/4", "1/0", "-1/2", "99999/100000", "a/b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err != nil {
			if !errors.Is(err, ErrBadShard) {
				t.Fatalf("ParseShard(%q): %v does not wrap ErrBadShard", s, err)
			}
			return
		}
		if sh.Validate() != nil || sh.Index >= sh.Count {
			t.Fatalf("ParseShard(%q) = %v accepted an invalid shard", s, sh)
		}
		if again, err := ParseShard(sh.String()); err != nil || again != sh {
			t.Fatalf("ParseShard(%q) = %v does not round-trip: %v, %v", s, sh, again, err)
		}
		if sh.String() != strconv.Itoa(sh.Index)+"/"+strconv.Itoa(sh.Count) {
			t.Fatalf("String() = %q", sh.String())
		}
	})
}
