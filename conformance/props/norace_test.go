//go:build !race

package props_test

// raceEnabled: see race_test.go.
const raceEnabled = false
