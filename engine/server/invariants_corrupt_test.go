package server

import (
	"reflect"
	"testing"
	"unsafe"
)

// corruptInt64Field adds delta to the unexported int64 field name of the
// struct *p points to: the only way a test outside package handoff can put
// one of its tables into a state its transitions never produce.
func corruptInt64Field(t *testing.T, p any, name string, delta int64) {
	t.Helper()
	v := reflect.ValueOf(p).Elem()
	f := v.FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Int64 {
		t.Fatalf("%T has no int64 field %s (the handoff core changed: update the test)", p, name)
	}
	f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	f.SetInt(f.Int() + delta)
}

// Entry and receive ids for the invariants tests (32 lowercase hex digits).
const (
	idA = "0123456789abcdef0123456789abcdef"
	idR = "fedcba9876543210fedcba9876543210"
)
