//go:build !invariants

package invariants

// On: without -tags invariants, the drivers' guards are constant-false
// branches the compiler removes.
const On = false
