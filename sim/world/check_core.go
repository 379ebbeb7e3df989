package world

import (
	"fmt"
)

// checkCore calls the core's own CheckInvariants on every node (doc.go
// invariants 1-4). That a quarantine shrinks only with its Q-6 proof is
// check_proof.go's.
//
// A table whose Version did not move since its last check is unchanged and
// is not checked again.
func checkCore(w *World) error {
	if v := (checkedCore{w.prod.table, nil, w.prod.table.Version()}); v != w.prod.checked {
		if err := w.prod.table.CheckInvariants(); err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		w.prod.checked = v
	}
	for _, c := range w.cons {
		if v := (checkedCore{nil, c.receives, c.receives.Version()}); v != c.checked {
			if err := c.receives.CheckInvariants(); err != nil {
				return fmt.Errorf("PD%d: %v", c.idx, err)
			}
			c.checked = v
		}
	}
	return nil
}
