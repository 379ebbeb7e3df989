package sim

import (
	"github.com/baton-dev/baton/sim/checks"
	"github.com/baton-dev/baton/sim/world"
)

// The world runs the checkers it is given (world.SetChecks): sim/checks'
// step and end lists, for every world whichever entry point (Run, Sweep,
// NewDriver, a Scenario) builds it.
func init() { world.SetChecks(checks.Default()) }
