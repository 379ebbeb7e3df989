//go:build race

package props_test

// raceEnabled: the tests run fewer checks under the race detector (make
// test's unit step) and the full count without it (rapidDefaults).
const raceEnabled = true
