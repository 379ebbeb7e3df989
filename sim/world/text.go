package world

import (
	"encoding/hex"
	"unsafe"
)

// The run's text: ids and receive keys are built into chunks of bytes the
// run owns (issue #16: one allocation per id or key was a twentieth of a
// run's allocations). A string made here shares its chunk's bytes, which
// are never written again: the chunk only grows past them, and a full
// chunk is dropped, never reused (not even by a later run).

// textChunk is the size of a run's text chunks after its first, which is
// sized for its handoffs (firstTextChunk).
const textChunk = 1024

// firstTextChunk is the size of a run's first text chunk: about an id and
// a receive key per handoff.
func firstTextChunk(s Settings) int { return 64 + 64*s.Handoffs }

// text returns an empty slice with room for n bytes at the end of the
// run's text; append to it (at most n bytes) and hand it to keep.
func (w *World) text(n int) []byte {
	if len(w.textBuf)+n > cap(w.textBuf) {
		size := textChunk
		if w.textBuf == nil {
			size = firstTextChunk(w.Set)
		}
		w.textBuf = make([]byte, 0, max(size, n))
	}
	l := len(w.textBuf)
	return w.textBuf[l : l : l+n]
}

// keep makes the bytes b appended to text's slice part of the run's text
// and returns them as a string.
func (w *World) keep(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	w.textBuf = w.textBuf[:len(w.textBuf)+len(b)]
	return unsafe.String(&b[0], len(b))
}

// Concat returns the concatenation of parts, made in the run's text
// (issue #16: for strings built on every handoff, a "+" each allocated).
func (w *World) Concat(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := w.text(n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return w.keep(b)
}

// Hex returns b in lowercase hex (hex.EncodeToString's), made in the run's text.
func (w *World) Hex(b []byte) string {
	x := w.text(2 * len(b))[:2*len(b)]
	hex.Encode(x, b)
	return w.keep(x)
}
