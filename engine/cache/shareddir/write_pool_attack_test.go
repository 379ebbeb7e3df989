package shareddir

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"testing"
)

// TestWritePooledBufferConcurrent: producers writing at once (each its own
// Dir, all sharing Dir.Write's pool of encode buffers), entries small,
// around the pool's 64 KiB bound and past it, some unencodable between
// them: every entry claimed back holds exactly what was written, and the
// metadata too (run with -race).
func TestWritePooledBufferConcurrent(t *testing.T) {
	root := t.TempDir()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			inst := fmt.Sprintf("%08x-2222-4333-8444-555555555555", g+1)
			d, err := OpenProducer(OSFS{}, root, inst, rand.Reader)
			if err != nil {
				t.Error(err)
				return
			}
			defer d.Close(true)
			rng := mrand.New(mrand.NewPCG(uint64(g), 3))
			sizes := []int{1, 100, 4000, 64<<10 - 200, 64 << 10, 64<<10 + 8, 200 << 10, 17}
			for i := 0; i < 60; i++ {
				n := sizes[rng.IntN(len(sizes))] / 4 * 4
				if n == 0 {
					n = 4
				}
				data := make([]byte, n)
				for j := range data {
					data[j] = byte(rng.IntN(256))
				}
				tensors := []Tensor{{Name: "x", DType: "F32", Shape: []int{n / 4}, Data: data}}
				md := map[string]string{"k": fmt.Sprint(g, "-", i)}
				id, err := NewEntryID(rand.Reader)
				if err != nil {
					t.Error(err)
					return
				}
				if i%7 == 3 { // unencodable: shape says more than data holds
					bad := []Tensor{{Name: "x", DType: "F32", Shape: []int{n/4 + 1}, Data: data}}
					if _, err := d.Write(id, bad, md); !errors.Is(err, ErrBadSafetensors) {
						t.Errorf("bad write: %v", err)
					}
					continue
				}
				if _, err := d.Write(id, tensors, md); err != nil {
					t.Error(err)
					return
				}
				got, gmd, err := Claim(OSFS{}, root, inst, id, rand.Reader, 1<<30)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) != 1 || !bytes.Equal(got[0].Data, data) || gmd["k"] != md["k"] {
					t.Errorf("producer %d entry %d (%d bytes): claimed back other bytes", g, i, n)
				}
			}
		}(g)
	}
	wg.Wait()
}
