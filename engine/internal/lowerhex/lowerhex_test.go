package lowerhex

import (
	"strings"
	"testing"
)

func isSimple(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// TestIsEveryByte puts every byte value at every position of strings of
// several lengths and compares Is with the byte-by-byte definition.
func TestIsEveryByte(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 12, 16, 31, 32, 33, 64} {
		base := []byte(strings.Repeat("0123456789abcdef", 5)[:n])
		if !Is(string(base)) {
			t.Fatalf("Is(%q) = false", base)
		}
		for i := 0; i < n; i++ {
			for c := 0; c < 256; c++ {
				b := append([]byte(nil), base...)
				b[i] = byte(c)
				if got, want := Is(string(b)), isSimple(string(b)); got != want {
					t.Fatalf("Is(%q) = %v, want %v", b, got, want)
				}
			}
		}
	}
}

func FuzzIs(f *testing.F) {
	f.Add("0123456789abcdef0123456789abcdef")
	f.Add("0123456789abcdeF0123456789abcdef")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Is(s), isSimple(s); got != want {
			t.Fatalf("Is(%q) = %v, want %v", s, got, want)
		}
	})
}

var sink bool

func BenchmarkIs32(b *testing.B) {
	s := "0123456789abcdef0123456789abcdef"
	for b.Loop() {
		sink = Is(s)
	}
}

func BenchmarkSimple32(b *testing.B) {
	s := "0123456789abcdef0123456789abcdef"
	for b.Loop() {
		sink = isSimple(s)
	}
}
