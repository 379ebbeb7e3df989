//go:build invariants

package server

// invariantsOn: built with -tags invariants, the engine checks the
// lifecycle core's invariants after every transition it makes and panics on
// a violation (invariants.go).
const invariantsOn = true
