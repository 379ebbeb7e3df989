package world

import (
	"fmt"
	"slices"
)

// checkContentHash: H-1. The content hash is over the non-premultiplied
// 16-bit pixels, so items whose decoded pixels differ (an alpha variant, a
// different colour under alpha 0) never share a hash: no published item's
// content hash equals that of an earlier published item with other pixels
// (checked once per newly published entry).
func checkContentHash(w *World) error {
	m := &w.media
	for ; m.contentHashSeen < len(m.published); m.contentHashSeen++ {
		pm := m.published[m.contentHashSeen]
		for i, it := range pm.items {
			h := pm.hashes[i]
			if h == "" {
				continue
			}
			k := slices.IndexFunc(m.byHash, func(r itemRef) bool { return r.pm.hashes[r.i] == h })
			if k < 0 {
				m.byHash = append(m.byHash, itemRef{pm, i})
				continue
			}
			if first := m.byHash[k]; mediaPool[first.pm.items[first.i].img].pixels != mediaPool[it.img].pixels {
				return fmt.Errorf("items with different non-premultiplied pixels share the content hash %s: %s and %s", short(h), itemRef{pm, i}, first)
			}
		}
	}
	return nil
}
