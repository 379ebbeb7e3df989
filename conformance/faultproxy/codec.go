package faultproxy

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// frame is one gRPC message carried as opaque bytes (never decoded).
type frame struct {
	payload []byte
}

// rawCodec is the pass-through codec: Marshal and Unmarshal move the bytes of
// a *frame as they are. Its name, "proto", is only the content-subtype used
// when the caller sent none (plain "application/grpc" means proto).
type rawCodec struct{}

var _ encoding.CodecV2 = rawCodec{}

// Marshal returns f.payload without copying; v must be a *frame.
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("faultproxy: raw codec cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(f.payload)}, nil
}

// Unmarshal copies data into v, which must be a *frame (gRPC frees data on
// return).
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("faultproxy: raw codec cannot unmarshal into %T", v)
	}
	f.payload = data.Materialize()
	return nil
}

// Name is the content-subtype used when the caller gave none.
func (rawCodec) Name() string { return "proto" }
