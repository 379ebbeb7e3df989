//go:build !race

package world

// raceEnabled: see race_test.go.
const raceEnabled = false
