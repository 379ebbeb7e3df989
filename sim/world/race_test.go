//go:build race

package world

// raceEnabled: tests that time or weigh many runs run fewer under the race
// detector (make test's unit step), which slows the world about tenfold.
const raceEnabled = true
