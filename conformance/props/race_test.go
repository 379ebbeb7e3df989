//go:build race

package props_test

// raceEnabled: the race detector makes the engine's encoder about four
// times slower, so the tests run fewer checks under it (make test's unit
// step) and the full count without it.
const raceEnabled = true
