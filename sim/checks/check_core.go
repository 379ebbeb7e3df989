package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkCore calls the core's own CheckInvariants on every node (doc.go
// invariants 1-4). That a quarantine shrinks only with its Q-6 proof is
// check_proof.go's.
//
// A table whose Version did not move since its last check is unchanged and
// is not checked again.
func checkCore(w *world.World) error {
	if v := (world.CheckedCore{Table: w.Prod.Table, Version: w.Prod.Table.Version()}); v != w.Prod.Checked {
		if err := w.Prod.Table.CheckInvariants(); err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		w.Prod.Checked = v
	}
	for _, c := range w.Cons {
		if v := (world.CheckedCore{Receives: c.Receives, Version: c.Receives.Version()}); v != c.Checked {
			if err := c.Receives.CheckInvariants(); err != nil {
				return fmt.Errorf("PD%d: %v", c.Idx, err)
			}
			c.Checked = v
		}
	}
	return nil
}
