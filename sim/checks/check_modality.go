package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkModality: L-3. Video and audio items are rejected before execution
// with UNIMPLEMENTED, so no publish carrying one is ever admitted: none
// reserves an entry (checked once per new entry of the ledger).
func checkModality(w *world.World) error {
	if w.Media.ModalitySeen >= len(w.Ledger.All) {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkModalityScan(w)
}

// checkModalityScan is checkModality's scan, once there is something to look at.
func checkModalityScan(w *world.World) error {
	for ; w.Media.ModalitySeen < len(w.Ledger.All); w.Media.ModalitySeen++ {
		rec := w.Ledger.All[w.Media.ModalitySeen]
		p := &w.Clients[rec.H].Plan.Media
		for i, it := range p.List() {
			if it.Modality != world.ModalityImage {
				return fmt.Errorf("client %d's publish carries an item of modality %s (item %d of %s) yet was admitted: entry %s reserved; want UNIMPLEMENTED before execution",
					rec.H, world.ModalityNames[it.Modality], i, world.DescribeItems(p.List()), world.Short(rec.Id))
			}
		}
	}
	return nil
}
