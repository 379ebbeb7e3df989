//go:build !invariants

package server

// invariantsOn: without -tags invariants, the checked tables' guards are
// constant-false branches the compiler removes (invariants.go).
const invariantsOn = false
