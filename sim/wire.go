package sim

import "github.com/baton-dev/baton/sim/world"

// The world runs the checkers it is given (world.SetChecks); these are
// every world's, whichever entry point (Run, Sweep, NewDriver, a Scenario)
// builds it.
func init() { world.SetChecks(world.Default()) }
