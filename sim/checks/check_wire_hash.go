package checks

import (
	"fmt"

	"github.com/baton-dev/baton/sim/world"
)

// checkWireHash: H-4. Wire-different but pixel-equal items (another
// encoding, a 16-bit source of the same pixels) hash equal: every published
// item's content hash equals that of every earlier published item with the
// same decoded pixels (checked once per newly published entry).
func checkWireHash(w *world.World) error {
	if w.Media.WireHashSeen >= len(w.Media.Published) {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkWireHashScan(w)
}

// checkWireHashScan is checkWireHash's scan, once there is something to look at.
func checkWireHashScan(w *world.World) error {
	m := &w.Media
	for ; m.WireHashSeen < len(m.Published); m.WireHashSeen++ {
		pm := m.Published[m.WireHashSeen]
		for i, it := range pm.Items {
			if pm.Hashes[i] == "" {
				continue
			}
			seen := &m.ByPixels[world.MediaPool[it.Img].PixelClass]
			if *seen == 0 {
				*seen = int32(1 + 2*m.WireHashSeen + i)
				continue
			}
			first := world.ItemRef{Pm: m.Published[(*seen-1)/2], I: int(*seen-1) % 2}
			if h := first.Pm.Hashes[first.I]; h != pm.Hashes[i] {
				return fmt.Errorf("pixel-equal items hash differently: %s has %s, %s has %s (the hash must be of the decoded pixels, not the wire bytes)",
					world.ItemRef{Pm: pm, I: i}, world.Short(pm.Hashes[i]), first, world.Short(h))
			}
		}
	}
	return nil
}
