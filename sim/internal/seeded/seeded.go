// Package seeded is the simulators' randomness: one PCG stream per
// subsystem of a run, all derived from the run's seed (sim/doc.go), and the
// splitmix64 finalizer used where a value must be a hash of a seed. The
// handoff world (package sim) and the executor world (sim/executorworld)
// draw the same way, so a seed means the same settings in a replay, a
// shard and a sweep.
package seeded

import (
	"math/rand/v2"

	"github.com/baton-dev/baton/internal/mix"
)

// Stream names one PRNG stream derived from the run's seed. Each subsystem
// draws only from its own stream, so adding a draw in one (a new fault site)
// does not shift the others.
type Stream uint64

// The streams; the numbers are arbitrary odd constants mixed into the PCG's
// second word. Changing one changes every run of every seed.
const (
	Settings Stream = 0x9e3779b97f4a7c15
	Workload Stream = 0xbf58476d1ce4e5b9
	IDs      Stream = 0x94d049bb133111eb
	Network  Stream = 0xd6e8feb86659fd93
	Faults   Stream = 0xa0761d6478bd642f
	Disk     Stream = 0xe7037ed1a0b428db
	Process  Stream = 0x8ebc6af09c88c6e3
)

// New returns the stream s of seed.
func New(seed uint64, s Stream) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(s)))
}

// Between draws an int64 uniformly from [lo, hi]; lo when hi <= lo.
func Between(r *rand.Rand, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + r.Int64N(hi-lo+1)
}

// Chance reports true with probability p.
func Chance(r *rand.Rand, p float64) bool { return r.Float64() < p }

// Mix64 is the splitmix64 finalizer (Steele, Lea, Flood 2014): a bijective
// 64-bit hash, the one engine/lm uses (internal/mix).
func Mix64(x uint64) uint64 { return mix.Mix64(x) }
