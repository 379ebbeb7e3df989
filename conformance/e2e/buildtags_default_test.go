//go:build !invariants

package e2e

// batonBuildTags: none (see buildtags_invariants_test.go).
const batonBuildTags = ""
