package world

import "fmt"

// checkCrashLost: SU-2, SU-5 after a producer crash. The entries of a
// crashed producer instance are gone with it: a reference to the old
// instance is refused, never served, so no receive gets such an entry's
// data after the crash.
func checkCrashLost(w *World) error {
	for _, l := range w.nodes.lost {
		if n := len(l.rec.consumptions); n > l.consumptions {
			return fmt.Errorf("entry %s of a crashed producer instance was served after the crash to %v", short(l.rec.id), l.rec.consumptions[l.consumptions:])
		}
	}
	return nil
}
