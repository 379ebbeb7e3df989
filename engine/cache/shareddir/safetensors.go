package shareddir

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// The safetensors format, as written and accepted here:
//
//	bytes [0, 8)        N, the header length in bytes, little-endian uint64
//	bytes [8, 8+N)      the header: one JSON object, padded with spaces
//	bytes [8+N, end)    the data: every tensor's bytes, contiguous, in data order
//
// The header maps "__metadata__" (optional) to an object of string values,
// and each tensor name to {"dtype": "F32", "shape": [rows, cols],
// "data_offsets": [begin, end]}, with offsets relative to the data start.
// EncodeSafetensors pads N to a multiple of 8 so the data is 8-byte aligned.

// headerLenBytes is the size of the little-endian uint64 that opens the file.
const headerLenBytes = 8

// DefaultMaxHeaderBytes bounds the JSON header Claim accepts (1 MiB): an
// encoder entry's header is a few hundred bytes, and the bound keeps a
// corrupt length from making the decoder scan the whole file as JSON.
const DefaultMaxHeaderBytes = 1 << 20

// metadataKey is the reserved header key that holds the string metadata.
const metadataKey = "__metadata__"

// dtypeSizes maps each safetensors dtype name this package accepts to its
// element size in bytes (names as in the safetensors specification).
var dtypeSizes = map[string]int{
	"BOOL":    1,
	"U8":      1,
	"I8":      1,
	"F8_E4M3": 1,
	"F8_E5M2": 1,
	"U16":     2,
	"I16":     2,
	"F16":     2,
	"BF16":    2,
	"U32":     4,
	"I32":     4,
	"F32":     4,
	"U64":     8,
	"I64":     8,
	"F64":     8,
}

// DTypeSize returns the element size in bytes of a safetensors dtype name
// ("F32" -> 4, "BF16" -> 2, "U8" -> 1, ...) and whether the dtype is known.
func DTypeSize(dtype string) (int, bool) {
	n, ok := dtypeSizes[dtype]
	return n, ok
}

// Tensor is one named tensor of a safetensors file: a dtype name ("F32",
// "F16", "BF16", "I32", "U8", ... see DTypeSize), a shape (row-major dims,
// each >= 0; an encoder output is [rows, cols] = [embedding rows, hidden
// size]) and its raw little-endian bytes, len(Data) == product(Shape) *
// DTypeSize(DType). Tensors returned by DecodeSafetensors alias the input.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

// F32Tensor returns an F32 tensor of shape [rows, cols] holding data as
// little-endian float32 (4*len(data) bytes). It does not check that
// len(data) == rows*cols; EncodeSafetensors rejects a mismatch with
// ErrBadSafetensors.
func F32Tensor(name string, rows, cols int, data []float32) Tensor {
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return Tensor{Name: name, DType: "F32", Shape: []int{rows, cols}, Data: b}
}

// F32TensorView is F32Tensor without the copy where the host is
// little-endian: Data is data's own memory seen as bytes, valid only while
// data is and changing with it (a writer that copies out at once, such as a
// file write or a device upload, saves 4*len(data) bytes of copying). On a
// big-endian host it is F32Tensor.
func F32TensorView(name string, rows, cols int, data []float32) Tensor {
	if !littleEndian || len(data) == 0 {
		return F32Tensor(name, rows, cols, data)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), 4*len(data))
	return Tensor{Name: name, DType: "F32", Shape: []int{rows, cols}, Data: b}
}

// littleEndian reports the host's byte order.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Float32s returns the tensor's elements as float32 (little-endian, row-major,
// product(Shape) values). Errors: ErrBadSafetensors if DType is not "F32" or
// len(Data) does not match the shape.
func (t Tensor) Float32s() ([]float32, error) {
	if t.DType != "F32" {
		return nil, fmt.Errorf("%w: tensor %q has dtype %s, want F32", ErrBadSafetensors, t.Name, t.DType)
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	out := make([]float32, len(t.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out, nil
}

// check validates the tensor's name, dtype and shape against len(Data).
func (t Tensor) check() error {
	if err := checkTensorName(t.Name); err != nil {
		return err
	}
	size, ok := dtypeSizes[t.DType]
	if !ok {
		return fmt.Errorf("%w: tensor %q has unknown dtype %.32q", ErrBadSafetensors, t.Name, t.DType)
	}
	dims := make([]uint64, len(t.Shape))
	for i, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("%w: tensor %q has negative dim %d in shape %v", ErrBadSafetensors, t.Name, d, t.Shape)
		}
		dims[i] = uint64(d)
	}
	want, ok := tensorBytes(dims, size)
	if !ok {
		return fmt.Errorf("%w: tensor %q shape %v overflows", ErrBadSafetensors, t.Name, t.Shape)
	}
	if uint64(len(t.Data)) != want {
		return fmt.Errorf("%w: tensor %q %s%v needs %d bytes, has %d", ErrBadSafetensors, t.Name, t.DType, t.Shape, want, len(t.Data))
	}
	return nil
}

// checkTensorName rejects names that cannot round-trip through the header.
func checkTensorName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty tensor name", ErrBadSafetensors)
	case name == metadataKey:
		return fmt.Errorf("%w: tensor name %q is reserved", ErrBadSafetensors, name)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: tensor name %q is not valid UTF-8", ErrBadSafetensors, name)
	}
	return nil
}

// tensorBytes returns product(dims)*size and false on overflow past the
// largest int (so the result always fits a slice length).
func tensorBytes(dims []uint64, size int) (uint64, bool) {
	n := uint64(size)
	for _, d := range dims {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 || lo > math.MaxInt {
			return 0, false
		}
		n = lo
	}
	return n, true
}

// tensorHeader is one tensor's entry in the JSON header.
type tensorHeader struct {
	DType       string   `json:"dtype"`
	Shape       []uint64 `json:"shape"`
	DataOffsets []uint64 `json:"data_offsets"`
}

// EncodeSafetensors returns the safetensors file holding tensors, in the
// given order, with metadata as "__metadata__" (omitted when empty). The
// header is padded with spaces to a multiple of 8 bytes; the data follows
// without gaps. Errors: ErrBadSafetensors for an empty, reserved ("__metadata__"),
// non-UTF-8 or duplicate tensor name, an unknown dtype, a negative dim, or
// len(Data) != product(Shape) * dtype size; non-UTF-8 metadata.
func EncodeSafetensors(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	return appendSafetensors(nil, tensors, metadata)
}

// appendSafetensors is EncodeSafetensors building the file in buf's
// storage when it has room (Dir.Write's pooled buffer), else in a new one;
// buf's contents are overwritten.
func appendSafetensors(buf []byte, tensors []Tensor, metadata map[string]string) ([]byte, error) {
	// The file is built in one buffer: the length placeholder, the header
	// written in place, then the data. Its capacity is a bound on the
	// header for names and metadata that need no JSON escaping (an escape
	// only makes append grow it) plus the data.
	est := headerLenBytes + 2 + 7 + len(metadataKey) + 5
	for k, v := range metadata {
		est += len(k) + len(v) + 6
	}
	for _, t := range tensors {
		est += len(t.Name) + len(t.DType) + 48 + 2*20 + 21*len(t.Shape) + len(t.Data)
	}
	var out []byte
	if cap(buf) >= est {
		out = buf[:headerLenBytes] // the length: written below
	} else {
		out = make([]byte, headerLenBytes, est)
	}
	out = append(out, '{')
	first := true
	sep := func() {
		if !first {
			out = append(out, ',')
		}
		first = false
	}
	if len(metadata) > 0 {
		var keyBuf [8]string // the usual few keys sort on the stack
		keys := keyBuf[:0]
		for k, v := range metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, fmt.Errorf("%w: metadata %q is not valid UTF-8", ErrBadSafetensors, k)
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		sep()
		out = append(out, `"`+metadataKey+`":{`...)
		for i, k := range keys {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendJSONString(out, k)
			out = append(out, ':')
			out = appendJSONString(out, metadata[k])
		}
		out = append(out, '}')
	}
	// Duplicate names: a scan of the earlier tensors for the usual few,
	// a set for many.
	var seen map[string]bool
	if len(tensors) > maxScannedTensors {
		seen = make(map[string]bool, len(tensors))
	}
	var offset uint64
	for i, t := range tensors {
		if err := t.check(); err != nil {
			return nil, err
		}
		if seen != nil && seen[t.Name] || seen == nil && slices.ContainsFunc(tensors[:i], func(u Tensor) bool { return u.Name == t.Name }) {
			return nil, fmt.Errorf("%w: duplicate tensor name %q", ErrBadSafetensors, t.Name)
		}
		if seen != nil {
			seen[t.Name] = true
		}
		end := offset + uint64(len(t.Data))
		sep()
		out = appendJSONString(out, t.Name)
		out = append(out, ':')
		out = appendTensorHeader(out, t.DType, t.Shape, offset, end)
		offset = end
	}
	out = append(out, '}')
	for (len(out)-headerLenBytes)%8 != 0 {
		out = append(out, ' ')
	}
	binary.LittleEndian.PutUint64(out, uint64(len(out)-headerLenBytes))
	for _, t := range tensors {
		out = append(out, t.Data...)
	}
	return out, nil
}

// maxScannedTensors is the most tensors EncodeSafetensors checks for
// duplicate names by scanning rather than with a set.
const maxScannedTensors = 8

// writeJSON appends v as compact JSON without HTML escaping. Only called with
// strings and tensorHeader, which always marshal.
func writeJSON(w *bytes.Buffer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("shareddir: marshal %T: %v", v, err))
	}
	w.Truncate(w.Len() - 1) // Encode appends a newline
}

// appendJSONString appends s as writeJSON would: printable ASCII without
// '"' or '\' is its own JSON (no HTML escaping), anything else goes
// through encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			var w bytes.Buffer
			writeJSON(&w, s)
			return append(dst, w.Bytes()...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendTensorHeader appends a tensor entry exactly as writeJSON of its
// tensorHeader{DType: dtype, Shape: shape, DataOffsets: {begin, end}} does
// (shape's dims are non-negative: Tensor.check), without reflection.
func appendTensorHeader(dst []byte, dtype string, shape []int, begin, end uint64) []byte {
	dst = append(dst, `{"dtype":`...)
	dst = appendJSONString(dst, dtype)
	dst = append(dst, `,"shape":[`...)
	for i, d := range shape {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(d), 10)
	}
	dst = append(dst, `],"data_offsets":[`...)
	dst = strconv.AppendUint(dst, begin, 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, end, 10)
	return append(dst, `]}`...)
}
