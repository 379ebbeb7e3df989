package world_test

import (
	"github.com/baton-dev/baton/sim/checks"
	"github.com/baton-dev/baton/sim/world"
)

// The world's tests run its worlds with sim/checks' checkers, as package
// sim does: an external test file may import a package that imports
// world, and its init runs before any test.
func init() { world.SetChecks(checks.Default()) }
