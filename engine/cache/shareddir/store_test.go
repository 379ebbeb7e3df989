package shareddir

import (
	"errors"
	"testing"
)

// TestStoreWithoutLogSweeps: a Store whose Log is nil (the field's zero
// value) logs a sweep's outcome nowhere instead of panicking.
func TestStoreWithoutLogSweeps(t *testing.T) {
	for _, swept := range []Swept{{Removed: 1}, {Removed: 1, Err: errors.New("permission denied")}} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Store{Log: nil}.LogSweep(%+v) panicked: %v", swept, r)
				}
			}()
			Store{}.LogSweep(swept)
		}()
	}
}
