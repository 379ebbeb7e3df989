package handoff

import (
	"regexp"
	"testing"
)

// TestIDFormsMatchTheirPatterns: the hand-written checks accept exactly
// what the documented patterns accept, over valid ids and each one-byte
// corruption of them (wrong length, upper case, a dash moved, a non-hex
// digit).
func TestIDFormsMatchTheirPatterns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check func(string) bool
		re    *regexp.Regexp
		valid string
	}{
		{"entry id", ValidEntryID, regexp.MustCompile(`^[0-9a-f]{32}$`), "0123456789abcdef0123456789abcdef"},
		{"instance id", ValidInstanceID, regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`), "01234567-89ab-cdef-0123-456789abcdef"},
		{"content hash", ValidContentHash, regexp.MustCompile(`^[0-9a-f]{64}$`), "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	} {
		inputs := []string{"", tc.valid, tc.valid + "0", tc.valid[1:]}
		for i := range tc.valid {
			for _, b := range []byte{'g', 'A', 'F', '-', '0', 'f', 0} {
				inputs = append(inputs, tc.valid[:i]+string(b)+tc.valid[i+1:])
			}
		}
		for _, in := range inputs {
			if got, want := tc.check(in), tc.re.MatchString(in); got != want {
				t.Errorf("%s %q: check %v, pattern %v", tc.name, in, got, want)
			}
		}
	}
}
