package world_test

import (
	"github.com/baton-dev/baton/sim/checks"
	"github.com/baton-dev/baton/sim/nodes"
	"github.com/baton-dev/baton/sim/world"
)

// The world's tests run its worlds with sim/nodes' behaviour and sim/checks'
// checkers, as package sim does: an external test file may import packages
// that import world, and its init runs before any test.
func init() {
	world.SetBehaviour(nodes.Behaviour())
	world.SetChecks(checks.Default())
}
