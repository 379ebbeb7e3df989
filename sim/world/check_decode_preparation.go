package world

import "fmt"

// checkDecodePreparation: L-2 and H-3 on D. A decode request for a KV
// session from a multimodal prefill without its decode preparation (L-2),
// or whose preparation carries a malformed content hash (H-3), is refused
// with INVALID_ARGUMENT before execution: D never attaches to its session
// nor fetches it. A request carrying an encoder reference is refused too
// (L-2: D never receives one). Checked for the requests D decided in the step.
func checkDecodePreparation(w *World) error {
	for _, r := range w.nodes.decided {
		if !r.ran {
			if r.res != resDecodeRefused && r.kind != prepOK {
				return fmt.Errorf("D%d answered %s to decode request %d whose preparation is %s, want INVALID_ARGUMENT", r.d, resNames[r.res], r.num, prepNames[r.kind])
			}
			continue
		}
		switch {
		case r.kind == prepMissing:
			w.nodes.decided = w.nodes.decided[:0]
			return fmt.Errorf("L-2 D%d ran decode request %d for multimodal KV session %s without a decode preparation", r.d, r.num, short(r.sessionID))
		case r.kind == prepBadHash:
			w.nodes.decided = w.nodes.decided[:0]
			return fmt.Errorf("H-3 D%d ran decode request %d whose decode preparation carries a malformed content hash", r.d, r.num)
		}
	}
	w.nodes.decided = w.nodes.decided[:0]
	return nil
}
