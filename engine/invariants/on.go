//go:build invariants

package invariants

// On: built with -tags invariants, the drivers check the lifecycle cores'
// invariants after every transition they make and panic on a violation.
const On = true
