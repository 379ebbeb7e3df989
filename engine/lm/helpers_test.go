package lm

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("lm.seed", 0, "seed of the randomized lm tests (0 = from the clock)")

// testRNG returns a seeded PRNG and logs its seed so a failure can be replayed
// with -lm.seed.
func testRNG(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("SEED=%d (replay with -lm.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0x6c6d))
}

// randomImage returns a [rows, cols] image of N(0,1) embeddings with a random
// 64-hex-digit content hash (cheaper than hashOf, and as unique).
func randomImage(rng *rand.Rand, rows, cols int) Image {
	data := make([]float32, rows*cols)
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	hash := fmt.Sprintf("%016x%016x%016x%016x", rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64())
	return Image{ContentHash: hash, Rows: rows, Cols: cols, Data: data}
}

func hashOf(data []float32) string {
	b := make([]byte, 0, 4*len(data))
	for _, v := range data {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// answer is everything a client sees of one generation.
type answer struct {
	tokens []Token
	text   string
	res    Result
}

func generate(t testing.TB, m *Model, req Request) answer {
	t.Helper()
	a, err := tryGenerate(m, req)
	if err != nil {
		t.Fatalf("Generate(%q, %d images) = %v, want no error", req.Prompt, len(req.Images), err)
	}
	return a
}

func tryGenerate(m *Model, req Request) (answer, error) {
	var a answer
	res, err := m.Generate(context.Background(), req, func(tok Token) error {
		a.tokens = append(a.tokens, tok)
		a.text += tok.Text
		return nil
	})
	a.res = res
	return a, err
}

func ids(tokens []Token) []uint32 {
	out := make([]uint32, len(tokens))
	for i, tok := range tokens {
		out[i] = tok.ID
	}
	return out
}
