package checks

import (
	"github.com/baton-dev/baton/sim/nodes"
	"github.com/baton-dev/baton/sim/world"
)

// The tests here step worlds with these checkers and sim/nodes' behaviour,
// as package sim does.
func init() {
	world.SetBehaviour(nodes.Behaviour())
	world.SetChecks(Default())
}
