package sim

import "fmt"

// checkCore calls the core's own CheckInvariants on every node (doc.go
// invariants 1-4) and checks, across steps, that a consumer's quarantine
// never shrinks within one incarnation.
func checkCore(w *World) string {
	if err := w.prod.table.CheckInvariants(); err != nil {
		return "producer: " + err.Error()
	}
	for _, c := range w.cons {
		if err := c.receives.CheckInvariants(); err != nil {
			return fmt.Sprintf("PD%d: %v", c.idx, err)
		}
		n, _ := c.receives.Quarantine()
		if n < c.quarantineSeen {
			return fmt.Sprintf("Q-1 PD%d quarantine shrank from %d to %d buffers", c.idx, c.quarantineSeen, n)
		}
		c.quarantineSeen = n
	}
	return ""
}
