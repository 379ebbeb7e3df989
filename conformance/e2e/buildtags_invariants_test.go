//go:build invariants

package e2e

// batonBuildTags are the build tags TestMain builds the baton binary with:
// the test's own, so `go test -tags invariants` (make e2e-invariants) runs
// every engine process with the lifecycle core's invariants checked after
// each transition (engine/invariants; engine/server/invariants.go, engine/consumer/checked.go).
const batonBuildTags = "invariants"
