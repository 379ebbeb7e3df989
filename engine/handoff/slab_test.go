package handoff

import "testing"

// TestSlab: every value is new, zero and distinct, through the inline first
// chunk and the allocated ones.
func TestSlab(t *testing.T) {
	var s slab[[2]int]
	seen := map[*[2]int]bool{}
	for i := 0; i < 100; i++ {
		p := s.new()
		if *p != [2]int{} || seen[p] {
			t.Fatalf("value %d: %v, seen %v", i, *p, seen[p])
		}
		seen[p] = true
		*p = [2]int{i, i}
	}
	if s.next != slabMaxChunk {
		t.Errorf("next chunk %d, want %d", s.next, slabMaxChunk)
	}
}
