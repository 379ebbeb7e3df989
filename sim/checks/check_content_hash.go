package checks

import (
	"fmt"
	"slices"

	"github.com/baton-dev/baton/sim/world"
)

// checkContentHash: H-1. The content hash is over the non-premultiplied
// 16-bit pixels, so items whose decoded pixels differ (an alpha variant, a
// different colour under alpha 0) never share a hash: no published item's
// content hash equals that of an earlier published item with other pixels
// (checked once per newly published entry).
func checkContentHash(w *world.World) error {
	if w.Media.ContentHashSeen >= len(w.Media.Published) {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkContentHashScan(w)
}

// checkContentHashScan is checkContentHash's scan, once there is something to look at.
func checkContentHashScan(w *world.World) error {
	m := &w.Media
	for ; m.ContentHashSeen < len(m.Published); m.ContentHashSeen++ {
		pm := m.Published[m.ContentHashSeen]
		for i, it := range pm.Items {
			h := pm.Hashes[i]
			if h == "" {
				continue
			}
			k := slices.IndexFunc(m.ByHash, func(r world.ItemRef) bool { return r.Pm.Hashes[r.I] == h })
			if k < 0 {
				m.ByHash = append(m.ByHash, world.ItemRef{Pm: pm, I: i})
				continue
			}
			if first := m.ByHash[k]; world.MediaPool[first.Pm.Items[first.I].Img].Pixels != world.MediaPool[it.Img].Pixels {
				return fmt.Errorf("items with different non-premultiplied pixels share the content hash %s: %s and %s", world.Short(h), world.ItemRef{Pm: pm, I: i}, first)
			}
		}
	}
	return nil
}
