package shareddir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawFile builds a safetensors file from a literal header (no padding added).
func rawFile(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestSafetensorsRoundTrip(t *testing.T) {
	f16 := []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38, 0xff, 0x7b, 0x00, 0x00, 0x00, 0x34} // 1, -2, 0.5, 65504, 0, 0.25
	tests := []struct {
		name     string
		tensors  []Tensor
		metadata map[string]string
	}{
		{"no tensors no metadata", nil, nil},
		{"metadata only", nil, map[string]string{"format": "pt", "content_hash": strings.Repeat("ab", 32)}},
		{"one F32", tinyOutput(3, 5, 0), map[string]string{"rows": "3"}},
		{"mixed dtypes in order", []Tensor{
			{Name: "h", DType: "F16", Shape: []int{2, 3}, Data: f16},
			{Name: "b", DType: "U8", Shape: []int{3}, Data: []byte{1, 2, 3}},
			{Name: "i", DType: "I32", Shape: []int{1, 2}, Data: []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}},
			{Name: "z", DType: "BF16", Shape: []int{0, 4}, Data: []byte{}},
			{Name: "s", DType: "F64", Shape: []int{}, Data: make([]byte, 8)},
		}, map[string]string{"": "empty key", "quote\"and<html>": "ünïcode"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeSafetensors(tc.tensors, tc.metadata)
			if err != nil {
				t.Fatalf("EncodeSafetensors = %v", err)
			}
			n := binary.LittleEndian.Uint64(b)
			if n%8 != 0 {
				t.Errorf("header length %d is not a multiple of 8", n)
			}
			if hdr := b[8 : 8+n]; !bytes.HasPrefix(hdr, []byte("{")) || strings.TrimRight(string(hdr), " ")[len(strings.TrimRight(string(hdr), " "))-1] != '}' {
				t.Errorf("header %q is not a space-padded object", hdr)
			}
			got, md, err := DecodeSafetensors(b, DefaultMaxHeaderBytes)
			if err != nil {
				t.Fatalf("DecodeSafetensors = %v", err)
			}
			if len(tc.metadata) == 0 && md != nil {
				t.Errorf("metadata = %v, want nil", md)
			}
			if len(tc.metadata) > 0 && !reflect.DeepEqual(md, tc.metadata) {
				t.Errorf("metadata = %v, want %v", md, tc.metadata)
			}
			if len(got) != len(tc.tensors) {
				t.Fatalf("got %d tensors, want %d", len(got), len(tc.tensors))
			}
			for i, want := range tc.tensors {
				g := got[i]
				if g.Name != want.Name || g.DType != want.DType || !reflect.DeepEqual(g.Shape, want.Shape) || !bytes.Equal(g.Data, want.Data) {
					t.Errorf("tensor %d = %+v, want %+v", i, g, want)
				}
			}
		})
	}
}

func TestFloat32s(t *testing.T) {
	vals := []float32{0, -1.5, float32(math.Inf(1)), math.MaxFloat32, math.SmallestNonzeroFloat32, 3}
	tn := F32Tensor("x", 2, 3, vals)
	if len(tn.Data) != 24 || binary.LittleEndian.Uint32(tn.Data[4:]) != math.Float32bits(-1.5) {
		t.Fatalf("F32Tensor data = % x, want little-endian float32", tn.Data)
	}
	got, err := tn.Float32s()
	if err != nil || !reflect.DeepEqual(got, vals) {
		t.Fatalf("Float32s() = %v, %v; want %v", got, err, vals)
	}
	bad := []Tensor{
		{Name: "x", DType: "F16", Shape: []int{2}, Data: make([]byte, 4)},
		{Name: "x", DType: "F32", Shape: []int{2}, Data: make([]byte, 4)},
		F32Tensor("x", 2, 2, []float32{1, 2, 3}),
	}
	for _, b := range bad {
		if _, err := b.Float32s(); !errors.Is(err, ErrBadSafetensors) {
			t.Errorf("Float32s(%s%v, %d bytes) = %v, want ErrBadSafetensors", b.DType, b.Shape, len(b.Data), err)
		}
	}
}

func TestEncodeSafetensorsRejects(t *testing.T) {
	ok := F32Tensor("a", 1, 1, []float32{1})
	tests := []struct {
		name     string
		tensors  []Tensor
		metadata map[string]string
	}{
		{"data shorter than shape", []Tensor{F32Tensor("a", 2, 2, []float32{1, 2, 3})}, nil},
		{"unknown dtype", []Tensor{{Name: "a", DType: "F33", Shape: []int{1}, Data: make([]byte, 4)}}, nil},
		{"negative dim", []Tensor{{Name: "a", DType: "U8", Shape: []int{-1}, Data: nil}}, nil},
		{"overflowing shape", []Tensor{{Name: "a", DType: "F32", Shape: []int{math.MaxInt / 2, 3}, Data: nil}}, nil},
		{"empty name", []Tensor{{Name: "", DType: "U8", Shape: []int{1}, Data: []byte{1}}}, nil},
		{"reserved name", []Tensor{{Name: "__metadata__", DType: "U8", Shape: []int{1}, Data: []byte{1}}}, nil},
		{"invalid utf-8 name", []Tensor{{Name: "\xff", DType: "U8", Shape: []int{1}, Data: []byte{1}}}, nil},
		{"duplicate name", []Tensor{ok, ok}, nil},
		{"invalid utf-8 metadata", []Tensor{ok}, map[string]string{"k": "\xfe"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if b, err := EncodeSafetensors(tc.tensors, tc.metadata); !errors.Is(err, ErrBadSafetensors) {
				t.Fatalf("EncodeSafetensors = %d bytes, %v; want ErrBadSafetensors", len(b), err)
			}
		})
	}
}

func TestDecodeSafetensorsMalformed(t *testing.T) {
	f32x4 := make([]byte, 16)
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 1<<62)
	tests := []struct {
		name string
		file []byte
		want string // substring of the error
	}{
		{"empty", nil, "shorter than"},
		{"seven bytes", []byte{2, 0, 0, 0, 0, 0, 0}, "shorter than"},
		{"header length 0", rawFile("", nil), "too short"},
		{"header length huge", huge, "exceeds the bound"},
		{"header length past the end", rawFile("{}", nil)[:9], "exceeds the 1 bytes"},
		{"header not utf-8", rawFile("{\"\xff\":1}", nil), "UTF-8"},
		{"header not an object", rawFile("[]", nil), "start with '{'"},
		{"bad json", rawFile(`{"a":`, nil), "header"},
		{"bad json unterminated string", rawFile(`{"a}`, nil), "header"},
		{"trailing garbage", rawFile(`{} x`, nil), "trailing"},
		{"two objects", rawFile(`{}{}`, nil), "trailing"},
		{"nul padding", rawFile("{}\x00\x00", nil), "trailing"},
		{"duplicate key", rawFile(`{"__metadata__":{},"__metadata__":{}}`, nil), "duplicate key"},
		{"metadata number", rawFile(`{"__metadata__":{"k":1}}`, nil), "want a string"},
		{"metadata null", rawFile(`{"__metadata__":{"k":null}}`, nil), "want a string"},
		{"metadata nested", rawFile(`{"__metadata__":{"k":{"a":"b"}}}`, nil), "want a string"},
		{"metadata not object", rawFile(`{"__metadata__":"x"}`, nil), "not an object"},
		{"metadata duplicate key", rawFile(`{"__metadata__":{"k":"a","k":"b"}}`, nil), "duplicate key"},
		{"tensor not object", rawFile(`{"a":[1]}`, nil), "not an object"},
		{"empty tensor name", rawFile(`{"":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, nil), "empty tensor name"},
		{"unknown dtype", rawFile(`{"a":{"dtype":"F31","shape":[4],"data_offsets":[0,16]}}`, f32x4), "unknown dtype"},
		{"lowercase dtype", rawFile(`{"a":{"dtype":"f32","shape":[4],"data_offsets":[0,16]}}`, f32x4), "unknown dtype"},
		{"missing shape", rawFile(`{"a":{"dtype":"F32","data_offsets":[0,16]}}`, f32x4), "exactly the fields"},
		{"null shape", rawFile(`{"a":{"dtype":"F32","shape":null,"data_offsets":[0,16]}}`, f32x4), "exactly the fields"},
		{"extra field", rawFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"x":1}}`, f32x4), "unknown field"},
		{"field in other case", rawFile(`{"a":{"DTYPE":"F32","shape":[4],"data_offsets":[0,16]}}`, f32x4), "exactly the fields"},
		{"duplicate field", rawFile(`{"a":{"dtype":"F32","dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, f32x4), "duplicate key"},
		{"negative dim", rawFile(`{"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}}`, f32x4), "tensor \"a\""},
		{"fractional dim", rawFile(`{"a":{"dtype":"F32","shape":[4.5],"data_offsets":[0,16]}}`, f32x4), "tensor \"a\""},
		{"string dim", rawFile(`{"a":{"dtype":"F32","shape":["4"],"data_offsets":[0,16]}}`, f32x4), "tensor \"a\""},
		{"shape overflow", rawFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}}`, f32x4), "overflows"},
		{"three offsets", rawFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16,16]}}`, f32x4), "want 2"},
		{"offsets reversed", rawFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}}`, f32x4), "end before"},
		{"negative offset", rawFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[-1,15]}}`, f32x4), "tensor \"a\""},
		{"span mismatch", rawFile(`{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,8]}}`, f32x4[:8]), "needs 16 bytes"},
		{"offsets out of range", rawFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, f32x4[:12]), "exceed the 12 data bytes"},
		{"offsets far out of range", rawFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[18446744073709551610,18446744073709551614]}}`, f32x4), "gap"},
		{"gap before first", rawFile(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}}`, f32x4), "gap of 4 bytes"},
		{"gap between", rawFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}}`, f32x4[:12]), "gap of 4 bytes"},
		{"overlapping", rawFile(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}}`, f32x4[:12]), "overlap"},
		{"same range twice", rawFile(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, f32x4[:8]), "overlap"},
		{"trailing data", rawFile(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}`, f32x4), "4 data bytes after"},
		{"data without tensors", rawFile(`{}`, []byte{1}), "1 data bytes after"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, md, err := DecodeSafetensors(tc.file, 4096)
			if !errors.Is(err, ErrBadSafetensors) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeSafetensors = %d tensors, %v, %v; want ErrBadSafetensors containing %q", len(ts), md, err, tc.want)
			}
		})
	}
}

// TestDecodeSafetensorsLenient checks inputs other writers produce that the
// format allows: an unaligned header, whitespace padding, reordered keys.
func TestDecodeSafetensorsLenient(t *testing.T) {
	tests := []struct {
		name string
		file []byte
	}{
		{"unaligned header", rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, []byte{1, 2})},
		{"whitespace and newline padding", rawFile("{\"a\" : {\"shape\":[2], \"data_offsets\":[0,2], \"dtype\":\"U8\"}}\n   ", []byte{1, 2})},
		{"metadata after tensors", rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"__metadata__":{"k":"v"}}`, []byte{1, 2})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, _, err := DecodeSafetensors(tc.file, 4096)
			if err != nil || len(ts) != 1 || !bytes.Equal(ts[0].Data, []byte{1, 2}) {
				t.Fatalf("DecodeSafetensors = %+v, %v; want tensor a = [1 2]", ts, err)
			}
		})
	}
}

// TestDecodeSafetensorsOrdersByOffset: tensors come back in data order,
// whatever their order in the header.
func TestDecodeSafetensorsOrdersByOffset(t *testing.T) {
	file := rawFile(`{"late":{"dtype":"U8","shape":[1],"data_offsets":[2,3]},"early":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, []byte{7, 8, 9})
	ts, _, err := DecodeSafetensors(file, 4096)
	if err != nil || len(ts) != 2 || ts[0].Name != "early" || ts[1].Name != "late" || ts[1].Data[0] != 9 {
		t.Fatalf("DecodeSafetensors = %+v, %v; want early [7 8] then late [9]", ts, err)
	}
}

func TestDecodeSafetensorsTruncatedAtEveryLength(t *testing.T) {
	b, err := EncodeSafetensors(tinyOutput(2, 3, 1), map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n++ {
		if _, _, err := DecodeSafetensors(b[:n], DefaultMaxHeaderBytes); !errors.Is(err, ErrBadSafetensors) {
			t.Fatalf("DecodeSafetensors(first %d of %d bytes) = %v, want ErrBadSafetensors", n, len(b), err)
		}
	}
	hdr := binary.LittleEndian.Uint64(b)
	if _, _, err := DecodeSafetensors(b, int(hdr)-1); !errors.Is(err, ErrBadSafetensors) {
		t.Fatalf("DecodeSafetensors(maxHeaderBytes=%d, header %d) = %v, want ErrBadSafetensors", hdr-1, hdr, err)
	}
}

// TestDecodeSafetensorsMutations flips random bytes of valid files: the
// decoder never panics, and whatever it accepts tiles the data exactly.
func TestDecodeSafetensorsMutations(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5afe))
	base, err := EncodeSafetensors([]Tensor{
		F32Tensor("a", 2, 3, []float32{1, 2, 3, 4, 5, 6}),
		{Name: "b", DType: "U8", Shape: []int{3}, Data: []byte{1, 2, 3}},
	}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	hdrEnd := 8 + int(binary.LittleEndian.Uint64(base))
	accepted := 0
	for i := 0; i < 3000; i++ {
		b := bytes.Clone(base)
		for k := 1 + rng.IntN(3); k > 0; k-- {
			pos := rng.IntN(hdrEnd) // mutate the length and the header
			b[pos] = byte(rng.IntN(256))
		}
		ts, _, err := DecodeSafetensors(b, DefaultMaxHeaderBytes)
		if err != nil {
			if !errors.Is(err, ErrBadSafetensors) {
				t.Fatalf("seed %d case %d: error %v does not wrap ErrBadSafetensors", seed, i, err)
			}
			continue
		}
		accepted++
		total := 0
		for _, tn := range ts {
			if err := tn.check(); err != nil {
				t.Fatalf("seed %d case %d: accepted tensor fails check: %v", seed, i, err)
			}
			total += len(tn.Data)
		}
		if n := binary.LittleEndian.Uint64(b); 8+int(n)+total != len(b) {
			t.Fatalf("seed %d case %d: accepted tensors cover %d of %d data bytes", seed, i, total, len(b)-8-int(n))
		}
	}
	t.Logf("%d of 3000 mutants accepted (e.g. a changed name or metadata value)", accepted)
}

// FuzzDecodeSafetensors: `go test -fuzz=FuzzDecodeSafetensors`; the seeds
// run as a unit test.
func FuzzDecodeSafetensors(f *testing.F) {
	good, _ := EncodeSafetensors(tinyOutput(2, 2, 0), map[string]string{"k": "v"})
	f.Add(good)
	f.Add(rawFile(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}}`, make([]byte, 12)))
	f.Add(rawFile(`{"__metadata__":{"k":1}}`, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, md, err := DecodeSafetensors(b, 1<<16)
		if err != nil {
			if !errors.Is(err, ErrBadSafetensors) {
				t.Fatalf("error %v does not wrap ErrBadSafetensors", err)
			}
			return
		}
		// Accepted input re-encodes and decodes to the same tensors.
		again, err := EncodeSafetensors(ts, md)
		if err != nil {
			t.Fatalf("re-encode accepted input: %v", err)
		}
		ts2, md2, err := DecodeSafetensors(again, 1<<20)
		if err != nil || len(ts2) != len(ts) || len(md2) != len(md) {
			t.Fatalf("re-decode: %d tensors %v, %v; want %d tensors", len(ts2), md2, err, len(ts))
		}
	})
}

// TestF32TensorViewMatchesCopy: the view has the copy's bytes, and on this
// (little-endian) host it aliases the float32s.
func TestF32TensorViewMatchesCopy(t *testing.T) {
	data := []float32{1, -2.5, float32(math.Inf(1)), 3e-38}
	view, copied := F32TensorView("x", 2, 2, data), F32Tensor("x", 2, 2, data)
	if !bytes.Equal(view.Data, copied.Data) || view.DType != "F32" || len(view.Shape) != 2 {
		t.Fatalf("view %v, copy %v", view, copied)
	}
	data[0] = 7
	if littleEndian && bytes.Equal(view.Data, copied.Data) {
		t.Errorf("the view does not follow its float32s")
	}
	if empty := F32TensorView("e", 0, 0, nil); len(empty.Data) != 0 {
		t.Errorf("empty view = %v", empty)
	}
}

// TestEncodeSafetensorsOneAllocation: an entry with ASCII names and a few
// metadata keys (every publish the engine makes) is encoded in one
// allocation, the file itself, sized for it up front.
func TestEncodeSafetensorsOneAllocation(t *testing.T) {
	ts := []Tensor{F32Tensor("encoder_output", 4, 8, make([]float32, 32))}
	md := map[string]string{"model": "m", "entry_id": "0123456789abcdef0123456789abcdef", "created_unix_ms": "1700000000000"}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := EncodeSafetensors(ts, md); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("EncodeSafetensors: %v allocations, want 1", n)
	}
	if b, _ := EncodeSafetensors(ts, md); len(b) > cap(b) || cap(b)-len(b) > 128 {
		t.Errorf("EncodeSafetensors: len %d, cap %d: the size bound is off", len(b), cap(b))
	}
}

// TestEncodeDuplicateNames: a duplicate name is refused whether the
// tensors are few (scanned) or many (a set), at the same tensor.
func TestEncodeDuplicateNames(t *testing.T) {
	for _, n := range []int{2, maxScannedTensors, maxScannedTensors + 1, 3 * maxScannedTensors} {
		ts := make([]Tensor, n)
		for i := range ts {
			ts[i] = F32Tensor("t"+strconv.Itoa(i), 1, 1, []float32{float32(i)})
		}
		if _, err := EncodeSafetensors(ts, nil); err != nil {
			t.Fatalf("%d distinct tensors: %v", n, err)
		}
		ts[n-1].Name = ts[n/2].Name
		if n/2 == n-1 {
			ts[n-1].Name = ts[0].Name
		}
		_, err := EncodeSafetensors(ts, nil)
		if !errors.Is(err, ErrBadSafetensors) || !strings.Contains(err.Error(), "duplicate tensor name") {
			t.Fatalf("%d tensors with a duplicate: %v", n, err)
		}
	}
}
