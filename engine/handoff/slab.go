package handoff

// slab hands out new values of T a chunk at a time: a table makes one
// value per entry or receive it admits, and one allocation per chunk
// costs less than one per value (issue #16). A chunk stays allocated while
// any value taken from it is reachable, so chunks are small. The zero
// slab is ready to use; like its table, it is not safe for concurrent use.
// The first chunk is the slab's own (first), in its table's allocation: a
// slab must not be copied once used.
type slab[T any] struct {
	free  []T
	next  int // the next chunk's length; 0 until first is handed out
	first [slabFirstChunk]T
}

// Chunk lengths: the first chunk is small (many tables admit a few
// values) and inline, each next one twice the last, up to slabMaxChunk.
const (
	slabFirstChunk = 2
	slabMaxChunk   = 16
)

// new returns a pointer to a new zero T.
func (s *slab[T]) new() *T {
	if len(s.free) == 0 {
		if s.next == 0 {
			s.next, s.free = slabFirstChunk, s.first[:]
		} else {
			s.next = min(2*s.next, slabMaxChunk)
			s.free = make([]T, s.next)
		}
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}
