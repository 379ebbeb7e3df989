// Package mix holds the one 64-bit mixing function the engine's model
// (engine/lm) and the simulators (sim) share.
package mix

// Mix64 is the splitmix64 finalizer (Steele, Lea, Flood 2014, "Fast
// splittable pseudorandom number generators"): a bijection on uint64 that
// spreads every input bit over the output.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
