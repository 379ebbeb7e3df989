package world

import "testing"

// TestLookupSite: siteSlots finds every site of AllSites at its index
// (siteIndex's answer) and no other string.
func TestLookupSite(t *testing.T) {
	for i, s := range AllSites {
		if ix, known := lookupSite(s); !known || int(ix) != i || siteIndex[s] != i {
			t.Errorf("lookupSite(%q) = %d, %v; want %d", s, ix, known, i)
		}
	}
	for _, s := range []Site{"", "x", "net.delay2", "net.dela", "process.crash"} {
		if _, known := lookupSite(s); known {
			t.Errorf("lookupSite(%q) found a site", s)
		}
	}
}
