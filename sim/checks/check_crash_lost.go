package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkCrashLost: SU-2, SU-5 after a producer crash. The entries of a
// crashed producer instance are gone with it: a reference to the old
// instance is refused, never served, so no receive gets such an entry's
// data after the crash.
func checkCrashLost(w *world.World) error {
	if len(w.Nodes.Lost) == 0 {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkCrashLostScan(w)
}

// checkCrashLostScan is checkCrashLost's scan, once there is something to look at.
func checkCrashLostScan(w *world.World) error {
	for _, l := range w.Nodes.Lost {
		if n := len(l.Rec.Consumptions); n > l.Consumptions {
			return fmt.Errorf("entry %s of a crashed producer instance was served after the crash to %v", world.Short(l.Rec.Id), l.Rec.Consumptions[l.Consumptions:])
		}
	}
	return nil
}
