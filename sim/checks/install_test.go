package checks

import "github.com/baton-dev/baton/sim/world"

// The tests here step worlds with these checkers, as package sim does.
func init() { world.SetChecks(Default()) }
