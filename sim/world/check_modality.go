package world

import "fmt"

// checkModality: L-3. Video and audio items are rejected before execution
// with UNIMPLEMENTED, so no publish carrying one is ever admitted: none
// reserves an entry (checked once per new entry of the ledger).
func checkModality(w *World) error {
	for ; w.media.modalitySeen < len(w.ledger.all); w.media.modalitySeen++ {
		rec := w.ledger.all[w.media.modalitySeen]
		p := &w.clients[rec.h].plan.media
		for i, it := range p.list() {
			if it.modality != modalityImage {
				return fmt.Errorf("client %d's publish carries an item of modality %s (item %d of %s) yet was admitted: entry %s reserved; want UNIMPLEMENTED before execution",
					rec.h, modalityNames[it.modality], i, describeItems(p.list()), short(rec.id))
			}
		}
	}
	return nil
}
