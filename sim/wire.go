package sim

import (
	"github.com/baton-dev/baton/sim/checks"
	"github.com/baton-dev/baton/sim/nodes"
	"github.com/baton-dev/baton/sim/world"
)

// The world runs the node behaviour and the checkers it is given
// (world.SetBehaviour, world.SetChecks): sim/nodes' handlers and hooks,
// and sim/checks' step and end lists, for every world whichever entry
// point (Run, Sweep, NewDriver, a Scenario) builds it.
func init() {
	world.SetBehaviour(nodes.Behaviour())
	world.SetChecks(checks.Default())
}
