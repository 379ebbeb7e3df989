//go:build !race

package sim

// raceEnabled: see race_test.go.
const raceEnabled = false
