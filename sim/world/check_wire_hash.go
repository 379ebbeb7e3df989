package world

import "fmt"

// checkWireHash: H-4. Wire-different but pixel-equal items (another
// encoding, a 16-bit source of the same pixels) hash equal: every published
// item's content hash equals that of every earlier published item with the
// same decoded pixels (checked once per newly published entry).
func checkWireHash(w *World) error {
	m := &w.media
	for ; m.wireHashSeen < len(m.published); m.wireHashSeen++ {
		pm := m.published[m.wireHashSeen]
		for i, it := range pm.items {
			if pm.hashes[i] == "" {
				continue
			}
			seen := &m.byPixels[mediaPool[it.img].pixelClass]
			if *seen == 0 {
				*seen = int32(1 + 2*m.wireHashSeen + i)
				continue
			}
			first := itemRef{m.published[(*seen-1)/2], int(*seen-1) % 2}
			if h := first.pm.hashes[first.i]; h != pm.hashes[i] {
				return fmt.Errorf("pixel-equal items hash differently: %s has %s, %s has %s (the hash must be of the decoded pixels, not the wire bytes)",
					itemRef{pm, i}, short(pm.hashes[i]), first, short(h))
			}
		}
	}
	return nil
}
