package handoff

// slab hands out new values of T a chunk at a time: a table makes one
// value per entry or receive it admits, and one allocation per chunk
// costs less than one per value (issue #16). A chunk stays allocated while
// any value taken from it is reachable, so chunks are small. The zero
// slab is ready to use; like its table, it is not safe for concurrent use.
type slab[T any] struct {
	free []T
	next int // the next chunk's length
}

// Chunk lengths: the first chunk is small (many tables admit a few
// values), each next one twice the last, up to slabMaxChunk.
const (
	slabFirstChunk = 2
	slabMaxChunk   = 16
)

// new returns a pointer to a new zero T.
func (s *slab[T]) new() *T {
	if len(s.free) == 0 {
		s.next = min(max(2*s.next, slabFirstChunk), slabMaxChunk)
		s.free = make([]T, s.next)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}
