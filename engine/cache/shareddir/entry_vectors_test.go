package shareddir

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

// rewriteEntryVector regenerates fixtures/vectors/entry.safetensors and
// entry.json from this package's encoder:
//
//	go test ./engine/cache/shareddir -run TestEntryVector -rewrite-vectors
var rewriteEntryVector = flag.Bool("rewrite-vectors", false, "rewrite fixtures/vectors/entry.* from the current implementation")

const (
	entryVectorFile = "../../../fixtures/vectors/entry.safetensors"
	entryVectorJSON = "../../../fixtures/vectors/entry.json"
)

type entryVectorTensor struct {
	Name   string    `json:"name"`
	DType  string    `json:"dtype"`
	Shape  []int     `json:"shape"`
	Values []float32 `json:"values"`
}

type entryVector struct {
	Comment      []string            `json:"comment"`
	Metadata     map[string]string   `json:"metadata"`
	Tensors      []entryVectorTensor `json:"tensors"`
	HeaderLength uint64              `json:"header_length"`
	Header       string              `json:"header"`
	FileBytes    int                 `json:"file_bytes"`
	FileSHA256   string              `json:"file_sha256"`
}

// computeEntryVector is the entry a producer writes for the first
// reference vector of fixtures/vectors/reference.json (one item, F32 [4, 8]).
func computeEntryVector(t *testing.T) (entryVector, []byte) {
	values := make([]float32, 32)
	for i := range values {
		values[i] = float32(i)/8 - 1
	}
	v := entryVector{
		Comment: []string{
			"A shared_dir entry file exactly as the reference engine writes it (docs/implementing.md section 4, shared_dir). Regenerate: go test ./engine/cache/shareddir -run TestEntryVector -rewrite-vectors",
			"File = u64 little-endian header_length, then header (JSON padded with spaces to a multiple of 8), then each tensor's little-endian float32 values, row-major, in item order.",
			"It is the entry of reference vector 0 (fixtures/vectors/reference.json): <root>/6f1c2a3b-4d5e-4f60-8172-93a4b5c6d7e8/00112233445566778899aabbccddeeff.safetensors.",
		},
		Metadata: map[string]string{
			"baton.format":               "baton.encoder.v1/entry",
			"baton.producer_instance_id": "6f1c2a3b-4d5e-4f60-8172-93a4b5c6d7e8",
			"baton.entry_id":             "00112233445566778899aabbccddeeff",
			"baton.items":                `[{"hash":"c2d238867c2c4a839da2f6b5f72ddcbad8777ce494f0a00ebd8d0f940f8e9634","rows":4,"cols":8}]`,
			"baton.created_unix_ms":      "1767225540000",
			"baton.ttl_ms":               "60000",
			"baton.preset":               "tiny",
		},
		Tensors: []entryVectorTensor{{Name: "item.0", DType: "F32", Shape: []int{4, 8}, Values: values}},
	}
	var tensors []Tensor
	for _, tv := range v.Tensors {
		tensors = append(tensors, F32Tensor(tv.Name, tv.Shape[0], tv.Shape[1], tv.Values))
	}
	file, err := EncodeSafetensors(tensors, v.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	v.HeaderLength = binary.LittleEndian.Uint64(file)
	v.Header = string(file[8 : 8+v.HeaderLength])
	v.FileBytes = len(file)
	sum := sha256.Sum256(file)
	v.FileSHA256 = hex.EncodeToString(sum[:])
	return v, file
}

// TestEntryVector keeps fixtures/vectors/entry.{safetensors,json} (quoted
// in docs/implementing.md) equal to what EncodeSafetensors writes, and
// checks DecodeSafetensors reads them back.
func TestEntryVector(t *testing.T) {
	v, file := computeEntryVector(t)
	desc, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	desc = append(desc, '\n')
	if *rewriteEntryVector {
		if err := os.WriteFile(entryVectorFile, file, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(entryVectorJSON, desc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gotFile, err1 := os.ReadFile(entryVectorFile)
	gotDesc, err2 := os.ReadFile(entryVectorJSON)
	if err1 != nil || err2 != nil {
		t.Fatalf("%v %v (regenerate with -rewrite-vectors)", err1, err2)
	}
	if !bytes.Equal(gotFile, file) || !bytes.Equal(gotDesc, desc) {
		t.Fatalf("fixtures/vectors/entry.* differ from what EncodeSafetensors writes; regenerate with -rewrite-vectors and update docs/implementing.md")
	}
	tensors, meta, err := DecodeSafetensors(gotFile, DefaultMaxHeaderBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta) != len(v.Metadata) || len(tensors) != 1 || tensors[0].Name != "item.0" {
		t.Fatalf("decoded %d metadata keys, %d tensors", len(meta), len(tensors))
	}
	for k, want := range v.Metadata {
		if meta[k] != want {
			t.Errorf("metadata %s = %q, want %q", k, meta[k], want)
		}
	}
	got, err := tensors[0].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != v.Tensors[0].Values[i] {
			t.Fatalf("value %d = %v, want %v", i, got[i], v.Tensors[0].Values[i])
		}
	}
}
