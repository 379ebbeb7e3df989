package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkDecodePreparation: L-2 and H-3 on D. A decode request for a KV
// session from a multimodal prefill without its decode preparation (L-2),
// or whose preparation carries a malformed content hash (H-3), is refused
// with INVALID_ARGUMENT before execution: D never attaches to its session
// nor fetches it. A request carrying an encoder reference is refused too
// (L-2: D never receives one). Checked for the requests D decided in the step.
func checkDecodePreparation(w *world.World) error {
	if len(w.Nodes.Decided) == 0 {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkDecodePreparationScan(w)
}

// checkDecodePreparationScan is checkDecodePreparation's scan, once there is something to look at.
func checkDecodePreparationScan(w *world.World) error {
	for _, r := range w.Nodes.Decided {
		if !r.Ran {
			if r.Res != world.ResDecodeRefused && r.Kind != world.PrepOK {
				return fmt.Errorf("D%d answered %s to decode request %d whose preparation is %s, want INVALID_ARGUMENT", r.D, world.ResNames[r.Res], r.Num, world.PrepNames[r.Kind])
			}
			continue
		}
		switch {
		case r.Kind == world.PrepMissing:
			w.Nodes.Decided = w.Nodes.Decided[:0]
			return fmt.Errorf("L-2 D%d ran decode request %d for multimodal KV session %s without a decode preparation", r.D, r.Num, world.Short(r.SessionID))
		case r.Kind == world.PrepBadHash:
			w.Nodes.Decided = w.Nodes.Decided[:0]
			return fmt.Errorf("H-3 D%d ran decode request %d whose decode preparation carries a malformed content hash", r.D, r.Num)
		}
	}
	w.Nodes.Decided = w.Nodes.Decided[:0]
	return nil
}
