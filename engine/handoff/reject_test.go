package handoff

import (
	"errors"
	"testing"
)

// TestRejectSIsRejectf: rejectS's lazy message is rejectf's, and it
// unwraps to its sentinel.
func TestRejectSIsRejectf(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		got, want error
	}{
		{rejectS(ErrDraining, "S-2 shutting down", "", "", false), rejectf(ErrDraining, "S-2 shutting down")},
		{rejectS(ErrQuarantined, "Q-4 ", "buffers lost", "", false), rejectf(ErrQuarantined, "Q-4 %s", "buffers lost")},
		{rejectS(ErrSpentReference, "SU-2 entry ", id, " is not published", false), rejectf(ErrSpentReference, "SU-2 entry %s is not published", id)},
		{rejectS(ErrSpentReference, "SU-2 reference ", id, " expired", true), rejectf(ErrSpentReference, "SU-2 reference %s expired", shortID(id))},
		{rejectS(ErrSpentReference, "SU-2 reference ", "ab", " expired", true), rejectf(ErrSpentReference, "SU-2 reference %s expired", shortID("ab"))},
	} {
		if c.got.Error() != c.want.Error() {
			t.Errorf("rejectS: %q, rejectf: %q", c.got.Error(), c.want.Error())
		}
		if !errors.Is(c.got, errors.Unwrap(c.want)) {
			t.Errorf("rejectS %q does not unwrap to %v", c.got.Error(), errors.Unwrap(c.want))
		}
	}
}
