package world

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// ErrBadShard marks a shard spec (`--shard i/n`, JOB_COMPLETION_INDEX,
// BATON_SHARDS) a sweep cannot use.
var ErrBadShard = errors.New("sim: bad shard")

// MaxShards bounds a sweep's shard count (a Kubernetes Indexed Job allows
// at most 100,000 completions).
const MaxShards = 100000

// Environment variables a shard reads its place from: Kubernetes sets
// EnvJobCompletionIndex in every pod of an Indexed Job (0-based); the Job
// (or the user) sets EnvShards to the number of completions.
const (
	EnvJobCompletionIndex = "JOB_COMPLETION_INDEX"
	EnvShards             = "BATON_SHARDS"
)

// Shard is one part of a sweep split n ways: Index in [0, Count). The
// zero value and 0/1 are the whole range.
//
// A range A..B (N = B-A+1 seeds) is split into contiguous blocks: shard i
// takes seeds A+floor(i*N/n) .. A+floor((i+1)*N/n)-1, so the blocks are
// disjoint, in index order, their union is exactly A..B, and their sizes
// differ by at most one (a shard of a range shorter than n may be empty).
// Blocks, not strides: a shard's part is itself a range (`--seeds` re-runs
// it alone, its result names it), and since every seed's cost is a hash of
// the seed, blocks balance as well as strides do.
type Shard struct {
	Index, Count int
}

// Whole reports whether s is the whole range (no split).
func (s Shard) Whole() bool { return s.Count <= 1 }

// String is "i/n" (the form ParseShard reads).
func (s Shard) String() string {
	if s.Count == 0 {
		return "0/1"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Validate rejects an index outside [0, Count) or a count outside [1, MaxShards].
// Errors wrap ErrBadShard.
func (s Shard) Validate() error {
	if s.Count == 0 && s.Index == 0 {
		return nil
	}
	if s.Count < 1 || s.Count > MaxShards {
		return fmt.Errorf("%w: shard count %d: want 1..%d", ErrBadShard, s.Count, MaxShards)
	}
	if s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("%w: shard index %d: want 0..%d (0-based, as JOB_COMPLETION_INDEX)", ErrBadShard, s.Index, s.Count-1)
	}
	return nil
}

// Part returns shard s's seeds of from..to (inclusive): from' <= to' and
// ok, or ok false when the shard's block is empty (more shards than seeds)
// or the range is empty or all 2^64 seeds.
func (s Shard) Part(from, to uint64) (uint64, uint64, bool) {
	if to < from || to-from == ^uint64(0) {
		return 0, 0, false
	}
	if s.Whole() {
		return from, to, true
	}
	n := to - from + 1
	start := blockStart(n, uint64(s.Index), uint64(s.Count))
	end := blockStart(n, uint64(s.Index+1), uint64(s.Count)) // exclusive
	if start == end {
		return 0, 0, false
	}
	return from + start, from + end - 1, true
}

// blockStart is floor(i*n/count) for i <= count, without overflow.
func blockStart(n, i, count uint64) uint64 {
	hi, lo := bits.Mul64(n, i)
	q, _ := bits.Div64(hi, lo, count) // hi < count since i <= count
	return q
}

// ParseShard reads "i/n" (0 <= i < n <= MaxShards, decimal, no sign or
// spaces). Errors wrap ErrBadShard.
func ParseShard(text string) (Shard, error) {
	a, b, ok := strings.Cut(text, "/")
	if !ok {
		return Shard{}, fmt.Errorf("%w: %q: want i/n (0-based index, count)", ErrBadShard, text)
	}
	i, err1 := parseCount(a)
	n, err2 := parseCount(b)
	if err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("%w: %q: want i/n with decimal numbers", ErrBadShard, text)
	}
	s := Shard{Index: i, Count: n}
	if n < 1 {
		return Shard{}, fmt.Errorf("%w: %q: the count must be at least 1", ErrBadShard, text)
	}
	if err := s.Validate(); err != nil {
		return Shard{}, fmt.Errorf("%q: %w", text, err)
	}
	return s, nil
}

// parseCount reads a plain decimal number (no sign, no spaces, at most 9 digits).
func parseCount(s string) (int, error) {
	if s == "" || len(s) > 9 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a count: %q", s)
	}
	return strconv.Atoi(s)
}

// ShardFrom decides a sweep's shard from the flags and the environment
// (lookup is os.LookupEnv in the CLI):
//
//   - spec, `--shard i/n`, when given, wins;
//   - else, with JOB_COMPLETION_INDEX set (a pod of a Kubernetes Indexed
//     Job), the index comes from there and the count from count
//     (`--shards N`, 0 when not given) or else BATON_SHARDS;
//   - else BATON_SHARDS alone is an error (which shard is this?), and with
//     neither the sweep is whole (0/1).
//
// spec together with count is an error too. Errors wrap ErrBadShard and
// name the flag or variable.
func ShardFrom(spec string, count int, lookup func(string) (string, bool)) (Shard, error) {
	if spec != "" {
		if count != 0 {
			return Shard{}, fmt.Errorf("%w: --shard and --shards exclude each other (--shards goes with %s)", ErrBadShard, EnvJobCompletionIndex)
		}
		return ParseShard(spec)
	}
	idxText, haveIdx := lookup(EnvJobCompletionIndex)
	nText, haveN := lookup(EnvShards)
	if !haveIdx || idxText == "" {
		if count != 0 || (haveN && nText != "") {
			return Shard{}, fmt.Errorf("%w: a shard count (--shards or %s) without an index: set %s or give --shard i/n", ErrBadShard, EnvShards, EnvJobCompletionIndex)
		}
		return Shard{Index: 0, Count: 1}, nil
	}
	i, err := parseCount(idxText)
	if err != nil {
		return Shard{}, fmt.Errorf("%w: %s=%q: want a 0-based index", ErrBadShard, EnvJobCompletionIndex, idxText)
	}
	n := count
	if n == 0 {
		if !haveN || nText == "" {
			return Shard{}, fmt.Errorf("%w: %s=%s but no shard count: give --shards N or set %s (the Job's completions)", ErrBadShard, EnvJobCompletionIndex, idxText, EnvShards)
		}
		if n, err = parseCount(nText); err != nil {
			return Shard{}, fmt.Errorf("%w: %s=%q: want a count", ErrBadShard, EnvShards, nText)
		}
	}
	s := Shard{Index: i, Count: n}
	if err := s.Validate(); err != nil {
		return Shard{}, fmt.Errorf("%s=%s: %w", EnvJobCompletionIndex, idxText, err)
	}
	return s, nil
}
