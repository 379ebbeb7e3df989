package world

import (
	"math/rand/v2"

	"github.com/baton-dev/baton/sim/internal/seeded"
)

// subsystem names one PRNG stream derived from the run's seed
// (seeded.Stream).
type subsystem = seeded.Stream

// The subsystems (seeded's streams).
const (
	subSettings = seeded.Settings
	subWorkload = seeded.Workload
	subIDs      = seeded.IDs
	subNetwork  = seeded.Network
	subFaults   = seeded.Faults
	subDisk     = seeded.Disk
	subProcess  = seeded.Process
)

// newRNG returns the stream of subsystem s for seed.
func newRNG(seed uint64, s subsystem) *rand.Rand { return seeded.New(seed, s) }

// rngCell holds one stream inside the value that owns it: a World seeds
// its streams into cells instead of allocating two objects per stream
// each run (issue #16).
type rngCell struct {
	pcg rand.PCG
	r   rand.Rand
}

// seed makes the cell the stream newRNG(seed, s) returns (the same draws)
// and returns it.
func (c *rngCell) seed(seed uint64, s subsystem) *rand.Rand {
	c.pcg.Seed(seed, uint64(s)) // rand.NewPCG(seed, s)'s state
	c.r = *rand.New(&c.pcg)
	return &c.r
}

// Between draws an int64 uniformly from [lo, hi] (hi >= lo).
func Between(r *rand.Rand, lo, hi int64) int64 { return seeded.Between(r, lo, hi) }

// Chance reports true with probability p.
func Chance(r *rand.Rand, p float64) bool { return seeded.Chance(r, p) }

// mix64 is seeded.Mix64.
func mix64(x uint64) uint64 { return seeded.Mix64(x) }
