package shareddir

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// pythonPath is the interpreter of the independent reader: Debian's python3
// with python3-numpy.
const pythonPath = "/usr/bin/python3"

// requirePythonNumpy skips the test when /usr/bin/python3 or numpy is
// missing, except under CI=true, where a missing reader is a failure.
func requirePythonNumpy(t *testing.T) {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but the independent safetensors reader cannot run: %s", why)
		}
		t.Skipf("skipping the independent-reader check: %s (install python3 and python3-numpy; under CI=true this fails)", why)
	}
	if _, err := os.Stat(pythonPath); err != nil {
		missing(pythonPath + " not found")
	}
	if out, err := exec.Command(pythonPath, "-c", "import numpy, json, struct").CombinedOutput(); err != nil {
		missing("python3 cannot import numpy: " + string(out))
	}
}

// expectTensor is what the Python reader must find in one tensor.
type expectTensor struct {
	Name    string       `json:"name"`
	DType   string       `json:"dtype"`
	Shape   []int        `json:"shape"`
	Values  []float64    `json:"values,omitempty"`
	Sum     *float64     `json:"sum,omitempty"`
	Samples [][2]float64 `json:"samples,omitempty"`
}

type expectFile struct {
	Path     string            `json:"path"`
	Metadata map[string]string `json:"metadata"`
	Tensors  []expectTensor    `json:"tensors"`
}

// u16s packs uint16 bit patterns little-endian.
func u16s(v ...uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

// bf16 returns the BF16 bit pattern of f (exact for the values used here).
func bf16(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }

// TestSafetensorsIndependentReader writes files with EncodeSafetensors and
// Dir.Write and has a Python/numpy reader (testdata/read_safetensors.py),
// which shares no code with this package, parse them and compare the values.
func TestSafetensorsIndependentReader(t *testing.T) {
	requirePythonNumpy(t)
	tmp := t.TempDir()
	var files []expectFile

	// 1. Every dtype family, odd sizes (unaligned tensor boundaries), a
	// zero-size and a scalar tensor, metadata that needs escaping.
	mixed := []Tensor{
		{Name: "half", DType: "F16", Shape: []int{2, 3}, Data: u16s(0x3c00, 0xc000, 0x3800, 0x7bff, 0x0000, 0x3400)},
		{Name: "bytes", DType: "U8", Shape: []int{3}, Data: []byte{0, 127, 255}},
		{Name: "ints", DType: "I32", Shape: []int{1, 2}, Data: []byte{7, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}},
		{Name: "brain", DType: "BF16", Shape: []int{3}, Data: u16s(bf16(1.5), bf16(-0.125), bf16(256))},
		{Name: "empty", DType: "F32", Shape: []int{0, 4}, Data: []byte{}},
		{Name: "scalar", DType: "F64", Shape: []int{}, Data: binary.LittleEndian.AppendUint64(nil, math.Float64bits(-3.25))},
	}
	md := map[string]string{"content_hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "quote\"<html>&": "ünïcode ✓", "": ""}
	b, err := EncodeSafetensors(mixed, md)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(tmp, "mixed.safetensors")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	files = append(files, expectFile{Path: p, Metadata: md, Tensors: []expectTensor{
		{Name: "half", DType: "F16", Shape: []int{2, 3}, Values: []float64{1, -2, 0.5, 65504, 0, 0.25}},
		{Name: "bytes", DType: "U8", Shape: []int{3}, Values: []float64{0, 127, 255}},
		{Name: "ints", DType: "I32", Shape: []int{1, 2}, Values: []float64{7, -2}},
		{Name: "brain", DType: "BF16", Shape: []int{3}, Values: []float64{1.5, -0.125, 256}},
		{Name: "empty", DType: "F32", Shape: []int{0, 4}, Values: nil},
		{Name: "scalar", DType: "F64", Shape: []int{}, Values: []float64{-3.25}},
	}})

	// 2. No metadata at all.
	p = filepath.Join(tmp, "bare.safetensors")
	b, err = EncodeSafetensors([]Tensor{F32Tensor("x", 1, 3, []float32{-1, 0, float32(math.Pi)})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	files = append(files, expectFile{Path: p, Tensors: []expectTensor{
		{Name: "x", DType: "F32", Shape: []int{1, 3}, Values: []float64{-1, 0, float64(float32(math.Pi))}},
	}})

	// 3. Entries published by a producer: a tiny one with every value, and
	// the base preset's [576, 1024] output checked by exact sum and samples.
	d, _ := newProducer(t)
	for _, shape := range [][2]int{{16, 64}, {576, 1024}} {
		rows, cols := shape[0], shape[1]
		ts := tinyOutput(rows, cols, 3)
		vals, err := ts[0].Float32s()
		if err != nil {
			t.Fatal(err)
		}
		id := newEntryID(t)
		emd := map[string]string{"entry": id}
		if _, err := d.Write(id, ts, emd); err != nil {
			t.Fatalf("Write = %v", err)
		}
		et := expectTensor{Name: "embeddings", DType: "F32", Shape: []int{rows, cols}}
		if rows*cols <= 1024 {
			for _, v := range vals {
				et.Values = append(et.Values, float64(v))
			}
		} else {
			var sum float64 // exact: every value is a multiple of 1/4 below 2^18
			for _, v := range vals {
				sum += float64(v)
			}
			et.Sum = &sum
			for _, i := range []int{0, 1, cols, rows*cols/2 + 17, rows*cols - 1} {
				et.Samples = append(et.Samples, [2]float64{float64(i), float64(vals[i])})
			}
		}
		files = append(files, expectFile{Path: filepath.Join(d.Path(), entryName(id)), Metadata: emd, Tensors: []expectTensor{et}})
	}

	out, err := runReader(t, tmp, files)
	t.Logf("independent reader:\n%s", out)
	if err != nil {
		t.Fatalf("read_safetensors.py rejected files written by EncodeSafetensors/Dir.Write: %v", err)
	}

	// The reader must be able to fail: a wrong expected value is caught.
	files[1].Tensors[0].Values[2] = 3.14
	if out, err := runReader(t, tmp, files[1:2]); err == nil {
		t.Fatalf("read_safetensors.py accepted a wrong expected value:\n%s", out)
	}
}

// runReader writes the manifest and runs the independent reader on it.
func runReader(t *testing.T, tmp string, files []expectFile) ([]byte, error) {
	t.Helper()
	manifest := filepath.Join(tmp, "manifest.json")
	mb, err := json.Marshal(map[string]any{"files": files})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, mb, 0o600); err != nil {
		t.Fatal(err)
	}
	return exec.Command(pythonPath, filepath.Join("testdata", "read_safetensors.py"), manifest).CombinedOutput()
}
