package sim

import "math/rand/v2"

// subsystem names one PRNG stream derived from the run's seed. Each subsystem
// draws only from its own stream, so adding a draw in one (a new fault site)
// does not shift the others.
type subsystem uint64

// The subsystems; the numbers are arbitrary odd constants mixed into the
// PCG's second word.
const (
	subSettings subsystem = 0x9e3779b97f4a7c15
	subWorkload subsystem = 0xbf58476d1ce4e5b9
	subIDs      subsystem = 0x94d049bb133111eb
	subNetwork  subsystem = 0xd6e8feb86659fd93
	subFaults   subsystem = 0xa0761d6478bd642f
	subDisk     subsystem = 0xe7037ed1a0b428db
	subProcess  subsystem = 0x8ebc6af09c88c6e3
)

// newRNG returns the stream of subsystem s for seed.
func newRNG(seed uint64, s subsystem) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(s)))
}

// between draws an int64 uniformly from [lo, hi] (hi >= lo).
func between(r *rand.Rand, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + r.Int64N(hi-lo+1)
}

// chance reports true with probability p.
func chance(r *rand.Rand, p float64) bool { return r.Float64() < p }
