package shareddir

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"unicode/utf8"
)

// DecodeSafetensors parses a safetensors file and returns its tensors in data
// order (their Data aliases b) and its "__metadata__" (nil when absent).
//
// Validation, every failure wrapped in ErrBadSafetensors with detail: b holds
// at least the 8-byte length; the header length N is 2..maxHeaderBytes and
// fits in b; the header is valid UTF-8 and exactly one JSON object (trailing
// whitespace allowed) without duplicate keys; "__metadata__" maps strings to
// strings only; every tensor entry has exactly the fields dtype, shape and
// data_offsets; dtypes are known (DTypeSize); dims and offsets are
// non-negative integers; begin <= end; product(shape) * dtype size == end -
// begin; and the tensors, in offset order, tile the data region exactly: the
// first begins at 0, each begins where the previous ends (no gap, no
// overlap) and the last ends at the end of b.
//
// Headers in the canonical form EncodeSafetensors writes are read by a fast
// path (safetensors_fast.go) that accepts a strict subset of what the JSON
// path accepts and returns exactly what it would; anything else, and every
// rejection, goes through the JSON path, so its errors are the JSON path's.
func DecodeSafetensors(b []byte, maxHeaderBytes int) ([]Tensor, map[string]string, error) {
	if ts, md, ok := decodeSafetensorsCanonical(b, maxHeaderBytes); ok {
		return ts, md, nil
	}
	return decodeSafetensorsJSON(b, maxHeaderBytes)
}

// decodeSafetensorsJSON is DecodeSafetensors through encoding/json: every
// input, every error.
func decodeSafetensorsJSON(b []byte, maxHeaderBytes int) ([]Tensor, map[string]string, error) {
	if len(b) < headerLenBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, shorter than the 8-byte header length", ErrBadSafetensors, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	switch {
	case n < 2:
		return nil, nil, fmt.Errorf("%w: header length %d is too short for a JSON object", ErrBadSafetensors, n)
	case maxHeaderBytes < 0 || n > uint64(maxHeaderBytes):
		return nil, nil, fmt.Errorf("%w: header length %d exceeds the bound of %d bytes", ErrBadSafetensors, n, maxHeaderBytes)
	case n > uint64(len(b)-headerLenBytes):
		return nil, nil, fmt.Errorf("%w: header length %d exceeds the %d bytes after the length", ErrBadSafetensors, n, len(b)-headerLenBytes)
	}
	header := b[headerLenBytes : headerLenBytes+int(n)]
	data := b[headerLenBytes+int(n):]
	if !utf8.Valid(header) {
		return nil, nil, fmt.Errorf("%w: header is not valid UTF-8", ErrBadSafetensors)
	}
	if header[0] != '{' {
		return nil, nil, fmt.Errorf("%w: header does not start with '{'", ErrBadSafetensors)
	}
	fields, err := decodeObject(header)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: header: %v", ErrBadSafetensors, err)
	}
	var metadata map[string]string
	type located struct {
		t          Tensor
		begin, end uint64
	}
	var all []located
	for _, f := range fields {
		if f.key == metadataKey {
			metadata, err = decodeMetadata(f.value)
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		t, begin, end, err := decodeTensorHeader(f.key, f.value)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, located{t, begin, end})
	}
	slices.SortStableFunc(all, func(a, b located) int {
		if c := cmp.Compare(a.begin, b.begin); c != 0 {
			return c
		}
		return cmp.Compare(a.end, b.end)
	})
	var next uint64
	tensors := make([]Tensor, len(all))
	for i, l := range all {
		switch {
		case l.begin < next:
			return nil, nil, fmt.Errorf("%w: tensor %q data_offsets [%d,%d] overlap the previous tensor ending at %d", ErrBadSafetensors, l.t.Name, l.begin, l.end, next)
		case l.begin > next:
			return nil, nil, fmt.Errorf("%w: gap of %d bytes before tensor %q at offset %d", ErrBadSafetensors, l.begin-next, l.t.Name, l.begin)
		case l.end > uint64(len(data)):
			return nil, nil, fmt.Errorf("%w: tensor %q data_offsets [%d,%d] exceed the %d data bytes", ErrBadSafetensors, l.t.Name, l.begin, l.end, len(data))
		}
		l.t.Data = data[l.begin:l.end:l.end]
		tensors[i] = l.t
		next = l.end
	}
	if next != uint64(len(data)) {
		return nil, nil, fmt.Errorf("%w: %d data bytes after the last tensor (tensors cover %d of %d)", ErrBadSafetensors, uint64(len(data))-next, next, len(data))
	}
	return tensors, metadata, nil
}

// field is one key/value pair of a JSON object, in input order.
type field struct {
	key   string
	value json.RawMessage
}

// decodeObject parses b as exactly one JSON object followed only by JSON
// whitespace and returns its fields in order, rejecting duplicate keys.
func decodeObject(b []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("want a JSON object, got %v", tok)
	}
	var fields []field
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("want an object key, got %v", tok)
		}
		if seen[key] {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("value of %q: %v", key, err)
		}
		fields = append(fields, field{key, v})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, err
	}
	rest := b[dec.InputOffset():]
	if len(bytes.TrimLeft(rest, " \t\r\n")) != 0 {
		return nil, fmt.Errorf("%d bytes of trailing data after the JSON object", len(rest))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	return fields, nil
}

// decodeMetadata parses the "__metadata__" value: an object of strings only.
func decodeMetadata(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("%w: %s is not an object", ErrBadSafetensors, metadataKey)
	}
	fields, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadSafetensors, metadataKey, err)
	}
	md := make(map[string]string, len(fields))
	for _, f := range fields {
		var s string
		if len(f.value) == 0 || f.value[0] != '"' || json.Unmarshal(f.value, &s) != nil {
			return nil, fmt.Errorf("%w: %s[%q] is %.40s, want a string", ErrBadSafetensors, metadataKey, f.key, f.value)
		}
		md[f.key] = s
	}
	return md, nil
}

// decodeTensorHeader parses one tensor entry and checks it on its own (dtype,
// dims, offsets, span); the tiling of the data region is checked by the caller.
func decodeTensorHeader(name string, raw json.RawMessage) (Tensor, uint64, uint64, error) {
	if err := checkTensorName(name); err != nil {
		return Tensor{}, 0, 0, err
	}
	if len(raw) == 0 || raw[0] != '{' {
		return Tensor{}, 0, 0, fmt.Errorf("%w: tensor %q entry is not an object", ErrBadSafetensors, name)
	}
	var h tensorHeader
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return Tensor{}, 0, 0, fmt.Errorf("%w: tensor %q: %v", ErrBadSafetensors, name, err)
	}
	// Duplicate or missing fields: decode again as an ordered object.
	fs, err := decodeObject(raw)
	if err != nil {
		return Tensor{}, 0, 0, fmt.Errorf("%w: tensor %q: %v", ErrBadSafetensors, name, err)
	}
	keys := map[string]bool{}
	for _, f := range fs {
		keys[f.key] = true
	}
	if len(fs) != 3 || !keys["dtype"] || !keys["shape"] || !keys["data_offsets"] || h.Shape == nil || h.DataOffsets == nil {
		return Tensor{}, 0, 0, fmt.Errorf("%w: tensor %q needs exactly the fields dtype, shape and data_offsets", ErrBadSafetensors, name)
	}
	size, ok := dtypeSizes[h.DType]
	if !ok {
		return Tensor{}, 0, 0, fmt.Errorf("%w: tensor %q has unknown dtype %.32q", ErrBadSafetensors, name, h.DType)
	}
	if len(h.DataOffsets) != 2 {
		return Tensor{}, 0, 0, fmt.Errorf("%w: tensor %q has %d data_offsets, want 2", ErrBadSafetensors, name, len(h.DataOffsets))
	}
	begin, end := h.DataOffsets[0], h.DataOffsets[1]
	if begin > end {
		return Tensor{}, 0, 0, fmt.Errorf("%w: tensor %q data_offsets [%d,%d] end before they begin", ErrBadSafetensors, name, begin, end)
	}
	want, ok := tensorBytes(h.Shape, size)
	if !ok {
		return Tensor{}, 0, 0, fmt.Errorf("%w: tensor %q shape %v overflows", ErrBadSafetensors, name, h.Shape)
	}
	if want != end-begin {
		return Tensor{}, 0, 0, fmt.Errorf("%w: tensor %q %s%v needs %d bytes, data_offsets [%d,%d] span %d", ErrBadSafetensors, name, h.DType, h.Shape, want, begin, end, end-begin)
	}
	shape := make([]int, len(h.Shape))
	for i, d := range h.Shape {
		if d > math.MaxInt {
			return Tensor{}, 0, 0, fmt.Errorf("%w: tensor %q dim %d overflows", ErrBadSafetensors, name, d)
		}
		shape[i] = int(d)
	}
	return Tensor{Name: name, DType: h.DType, Shape: shape}, begin, end, nil
}
