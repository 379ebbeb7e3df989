package lm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestGenerateDeterministic (B-1): the same inputs give the same tokens and
// usage on the same model, on a fresh model with the same seed, and whether
// the prompt state came from the prefix cache or not.
func TestGenerateDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	img1, img2 := randomImage(rng, 196, 64), randomImage(rng, 16, 64)
	noHash := img1
	noHash.ContentHash = ""
	tests := []struct {
		name string
		req  Request
	}{
		{name: "text only", req: Request{Prompt: "Say something."}},
		{name: "token ids", req: Request{TokenIDs: Tokenize("Say something.")}},
		{name: "one image, no marker", req: Request{Prompt: "What is this?", Images: []Image{img1}}},
		{name: "two images, markers", req: Request{Prompt: "Compare <image> with <image>.", Images: []Image{img1, img2}}},
		{name: "missing hash (H-2)", req: Request{Prompt: "What is this?", Images: []Image{noHash}}},
		{name: "long answer", req: Request{Prompt: "Go on.", IgnoreEOS: true, MaxTokens: 300}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{Seed: 7})
			first := generate(t, m, tt.req)
			again := generate(t, m, tt.req) // possibly from the prefix cache
			fresh := generate(t, New(Config{Seed: 7}), tt.req)
			for _, other := range []answer{again, fresh} {
				if !slices.Equal(first.tokens, other.tokens) || first.res != other.res {
					t.Errorf("answers differ for equal inputs:\n%q %+v\n%q %+v", first.text, first.res, other.text, other.res)
				}
			}
			if len(first.tokens) == 0 {
				t.Errorf("empty answer %+v", first.res)
			}
			if other := generate(t, New(Config{Seed: 8}), tt.req); slices.Equal(first.tokens, other.tokens) {
				t.Errorf("seeds 7 and 8 gave the same answer %q", first.text)
			}
		})
	}
}

// TestB2DifferentImagesDifferentAnswers: random [196, 512] embeddings with the
// same prompt give different answers.
func TestB2DifferentImagesDifferentAnswers(t *testing.T) {
	rng := testRNG(t)
	m := New(Config{})
	const pairs = 32
	same := 0
	for i := range pairs {
		a := generate(t, m, Request{Prompt: "Describe the image.", Images: []Image{randomImage(rng, 196, 512)}})
		b := generate(t, m, Request{Prompt: "Describe the image.", Images: []Image{randomImage(rng, 196, 512)}})
		if slices.Equal(ids(a.tokens), ids(b.tokens)) {
			same++
			t.Logf("pair %d: both answered %q", i, a.text)
		}
	}
	if same > pairs/20 {
		t.Errorf("%d/%d pairs of different images got the same answer, want at most %d", same, pairs, pairs/20)
	}
}

// TestImageMarkerPlacement: markers put images where they are; without
// markers images go before the prompt, in order.
func TestImageMarkerPlacement(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a, b := randomImage(rng, 196, 64), randomImage(rng, 196, 64)
	tests := []struct {
		name     string
		x, y     Request
		wantSame bool
	}{
		{name: "no marker = marker first",
			x: Request{Prompt: "What is it?", Images: []Image{a}}, y: Request{Prompt: "<image>What is it?", Images: []Image{a}}, wantSame: true},
		{name: "two images, no markers = markers first",
			x: Request{Prompt: "Compare.", Images: []Image{a, b}}, y: Request{Prompt: "<image><image>Compare.", Images: []Image{a, b}}, wantSame: true},
		{name: "token ids = text",
			x: Request{TokenIDs: Tokenize("Compare <image> to <image>"), Images: []Image{a, b}}, y: Request{Prompt: "Compare <image> to <image>", Images: []Image{a, b}}, wantSame: true},
		{name: "marker position matters",
			x: Request{Prompt: "<image> What is it?", Images: []Image{a}}, y: Request{Prompt: "What is <image> it?", Images: []Image{a}}},
		{name: "image order matters",
			x: Request{Prompt: "Compare.", Images: []Image{a, b}}, y: Request{Prompt: "Compare.", Images: []Image{b, a}}},
		{name: "image vs text only",
			x: Request{Prompt: "What is it?", Images: []Image{a}}, y: Request{Prompt: "What is it?"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{})
			x, y := generate(t, m, tt.x), generate(t, m, tt.y)
			if same := slices.Equal(x.tokens, y.tokens); same != tt.wantSame {
				t.Errorf("answers %q and %q: same = %v, want %v", x.text, y.text, same, tt.wantSame)
			}
		})
	}
}

func TestImageMarkerMismatch(t *testing.T) {
	img := Image{ContentHash: "h", Rows: 2, Cols: 2, Data: []float32{1, 2, 3, 4}}
	tests := []struct {
		name string
		req  Request
	}{
		{name: "two markers, one image", req: Request{Prompt: "<image> and <image>", Images: []Image{img}}},
		{name: "one marker, two images", req: Request{Prompt: "<image> and", Images: []Image{img, img}}},
		{name: "marker, no image", req: Request{Prompt: "look: <image>"}},
		{name: "marker id, no image", req: Request{TokenIDs: []uint32{ImageID, tokenIDs["cat"]}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(Config{}).Prefill(tt.req); !errors.Is(err, ErrImageMarkers) {
				t.Errorf("Prefill(%q, %d images) = %v, want ErrImageMarkers", tt.req.Prompt, len(tt.req.Images), err)
			}
		})
	}
}

// TestH2MissingContentHash: images without a content hash get fresh random
// identities: two different images keep their own answers, and the same image
// sent twice without hash never hits the prefix cache.
func TestH2MissingContentHash(t *testing.T) {
	rng := testRNG(t)
	a, b := randomImage(rng, 196, 64), randomImage(rng, 196, 64)
	baseA := generate(t, New(Config{}), Request{Prompt: "What is it?", Images: []Image{a}})
	baseB := generate(t, New(Config{}), Request{Prompt: "What is it?", Images: []Image{b}})
	if slices.Equal(baseA.tokens, baseB.tokens) {
		t.Fatalf("baselines of two random images are equal (%q); pick another seed", baseA.text)
	}
	a.ContentHash, b.ContentHash = "", ""
	m := New(Config{})
	for i, tc := range []struct {
		img  Image
		want answer
	}{{a, baseA}, {b, baseB}, {a, baseA}} {
		got := generate(t, m, Request{Prompt: "What is it?", Images: []Image{tc.img}})
		if !slices.Equal(got.tokens, tc.want.tokens) {
			t.Errorf("request %d without hash answered %q, want its own baseline %q", i, got.text, tc.want.text)
		}
	}
	if hits, misses := m.PrefixCacheStats(); hits != 0 || misses != 3 {
		t.Errorf("PrefixCacheStats() = %d hits, %d misses; want 0 hits, 3 misses (H-2: no reuse without hash)", hits, misses)
	}
	// With a hash the second request of the same image does hit.
	a.ContentHash = hashOf(a.Data)
	m = New(Config{})
	generate(t, m, Request{Prompt: "What is it?", Images: []Image{a}})
	generate(t, m, Request{Prompt: "What is it?", Images: []Image{a}})
	if hits, _ := m.PrefixCacheStats(); hits != 1 {
		t.Errorf("same hashed image twice: %d hits, want 1", hits)
	}
}

// TestH2FreshIdentitiesFromRand: fresh identities come from Config.Rand, and a
// failing Rand is ErrIdentity, never a cache key without identity.
func TestH2FreshIdentitiesFromRand(t *testing.T) {
	img := Image{Rows: 2, Cols: 2, Data: []float32{1, 2, 3, 4}}
	var keys []string
	m := New(Config{
		Rand: bytes.NewReader(bytes.Repeat([]byte{0xab}, 16)),
		PrefixKey: func(tokenIDs []uint32, identities []string) string {
			keys = append(keys, strings.Join(identities, ","))
			return DefaultPrefixKey(tokenIDs, identities)
		},
	})
	generate(t, m, Request{Prompt: "x", Images: []Image{img}})
	if want := FreshIdentityPrefix + strings.Repeat("ab", 16); len(keys) != 1 || keys[0] != want {
		t.Errorf("identities = %q, want [%q]", keys, want)
	}
	if _, err := m.Prefill(Request{Prompt: "x", Images: []Image{img}}); !errors.Is(err, ErrIdentity) || !errors.Is(err, io.EOF) {
		t.Errorf("Prefill with an exhausted Rand = %v, want ErrIdentity wrapping io.EOF", err)
	}
}

// TestPrefixKeyIgnoringIdentitiesReusesState shows the cache stores real
// state: under a key that ignores image identities (the text-only mutant), a
// second image with the same prompt gets the first image's answer (B-2
// broken); under DefaultPrefixKey it gets its own.
func TestPrefixKeyIgnoringIdentitiesReusesState(t *testing.T) {
	rng := testRNG(t)
	a, b := randomImage(rng, 196, 512), randomImage(rng, 196, 512)
	textOnly := func(tokenIDs []uint32, _ []string) string { return DefaultPrefixKey(tokenIDs, nil) }
	tests := []struct {
		name     string
		key      func([]uint32, []string) string
		wantSame bool
		wantHits uint64
	}{
		{name: "default key", key: nil, wantSame: false, wantHits: 0},
		{name: "text-only key", key: textOnly, wantSame: true, wantHits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{PrefixKey: tt.key})
			x := generate(t, m, Request{Prompt: "Describe the image.", Images: []Image{a}})
			y := generate(t, m, Request{Prompt: "Describe the image.", Images: []Image{b}})
			if same := slices.Equal(x.tokens, y.tokens); same != tt.wantSame {
				t.Errorf("answers %q and %q: same = %v, want %v", x.text, y.text, same, tt.wantSame)
			}
			if hits, _ := m.PrefixCacheStats(); hits != tt.wantHits {
				t.Errorf("prefix cache hits = %d, want %d", hits, tt.wantHits)
			}
		})
	}
}

func TestPrefixCacheLRU(t *testing.T) {
	m := New(Config{PrefixCacheEntries: 2})
	for _, p := range []string{"one", "two", "one", "three", "two"} {
		generate(t, m, Request{Prompt: p})
	}
	// one: miss, two: miss, one: hit, three: miss (evicts two), two: miss.
	if hits, misses := m.PrefixCacheStats(); hits != 1 || misses != 4 {
		t.Errorf("PrefixCacheStats() = %d hits, %d misses; want 1, 4", hits, misses)
	}
	off := New(Config{PrefixCacheEntries: -1})
	generate(t, off, Request{Prompt: "one"})
	if s, _ := off.Prefill(Request{Prompt: "one"}); s.PrefixCacheHit() {
		t.Errorf("a disabled cache (PrefixCacheEntries < 0) hit")
	}
}

func TestUsageCounts(t *testing.T) {
	img := func(rows int) Image {
		return Image{ContentHash: fmt.Sprint("rows", rows), Rows: rows, Cols: 3, Data: make([]float32, rows*3)}
	}
	text := "Compare the two pictures."
	n := uint32(len(Tokenize(text)))
	tests := []struct {
		name string
		req  Request
		want uint32
	}{
		{name: "text only", req: Request{Prompt: text}, want: n},
		{name: "token ids", req: Request{TokenIDs: Tokenize(text)}, want: n},
		{name: "one image, no marker", req: Request{Prompt: text, Images: []Image{img(196)}}, want: n + 196},
		{name: "marker replaced by rows", req: Request{Prompt: "<image>" + text, Images: []Image{img(196)}}, want: n + 196},
		{name: "two images", req: Request{Prompt: "<image>" + text + "<image>", Images: []Image{img(10), img(20)}}, want: n + 30},
		{name: "image only", req: Request{Images: []Image{img(7)}}, want: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := generate(t, New(Config{}), tt.req)
			if a.res.PromptTokens != tt.want {
				t.Errorf("PromptTokens = %d, want %d", a.res.PromptTokens, tt.want)
			}
			if int(a.res.CompletionTokens) != len(a.tokens) {
				t.Errorf("CompletionTokens = %d, but %d tokens were emitted", a.res.CompletionTokens, len(a.tokens))
			}
		})
	}
}

// TestAnswerLengths: EOS comes with a modest probability, so answers have
// varying lengths, typically 5-40 tokens.
func TestAnswerLengths(t *testing.T) {
	m := New(Config{})
	var lengths []int
	for i := range 200 {
		a := generate(t, m, Request{Prompt: fmt.Sprintf("Question %d?", i), MaxTokens: 1000})
		if a.res.Finish != FinishStop || a.res.StopBy != StopByEOS {
			t.Fatalf("prompt %d ended %+v, want EOS within 1000 tokens", i, a.res)
		}
		lengths = append(lengths, len(a.tokens))
	}
	slices.Sort(lengths)
	lo, mid, hi := lengths[len(lengths)/10], lengths[len(lengths)/2], lengths[len(lengths)*9/10]
	t.Logf("answer lengths: p10 %d, median %d, p90 %d, min %d, max %d", lo, mid, hi, lengths[0], lengths[len(lengths)-1])
	if lengths[0] < eosFreeSteps || lo < 5 || hi > 45 || mid < 8 || mid > 25 {
		t.Errorf("answer lengths p10 %d, median %d, p90 %d; want mostly within 5-40", lo, mid, hi)
	}
}

func TestMalformedRequests(t *testing.T) {
	good := Image{ContentHash: "h", Rows: 2, Cols: 2, Data: []float32{1, 2, 3, 4}}
	big := Image{ContentHash: "big", Rows: 196, Cols: 1, Data: make([]float32, 196)}
	tests := []struct {
		name string
		cfg  Config
		req  Request
		want error
	}{
		{name: "token id = vocab size", req: Request{TokenIDs: []uint32{uint32(VocabSize())}}, want: ErrTokenOutOfRange},
		{name: "token id max uint32", req: Request{TokenIDs: []uint32{5, ^uint32(0)}}, want: ErrTokenOutOfRange},
		{name: "stop token id out of range", req: Request{Prompt: "x", StopTokenIDs: []uint32{1 << 20}}, want: ErrTokenOutOfRange},
		{name: "prompt and token ids", req: Request{Prompt: "x", TokenIDs: []uint32{5}}, want: ErrInvalidInput},
		{name: "empty prompt", req: Request{}, want: ErrEmptyPrompt},
		{name: "bad image", req: Request{Prompt: "x", Images: []Image{good, {Rows: 2, Cols: 2, Data: []float32{1}}}}, want: ErrBadImage},
		{name: "context too long", cfg: Config{MaxContextTokens: 100}, req: Request{Prompt: "x", Images: []Image{big}}, want: ErrContextTooLong},
		{name: "prompt fills context", cfg: Config{MaxContextTokens: 197}, req: Request{Prompt: "x", Images: []Image{big}}, want: ErrContextTooLong},
		{name: "empty stop text", req: Request{Prompt: "x", StopTexts: []string{"ok", ""}}, want: ErrBadStopping},
		{name: "min > max tokens", req: Request{Prompt: "x", MinTokens: 5, MaxTokens: 4}, want: ErrBadStopping},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(tt.cfg)
			if s, err := m.Prefill(tt.req); !errors.Is(err, tt.want) {
				t.Errorf("Prefill() = %v, %v; want %v", s, err, tt.want)
			}
			a, err := tryGenerate(m, tt.req)
			if !errors.Is(err, tt.want) || len(a.tokens) != 0 {
				t.Errorf("Generate() = %d tokens, %v; want no token and %v", len(a.tokens), err, tt.want)
			}
			if hits, misses := m.PrefixCacheStats(); hits+misses != 0 {
				t.Errorf("a rejected request touched the prefix cache (%d hits, %d misses)", hits, misses)
			}
		})
	}
}

// TestConcurrentGenerate: one Model serves many goroutines (run with -race);
// each gets exactly its sequential answer.
func TestConcurrentGenerate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	images := []Image{randomImage(rng, 49, 64), randomImage(rng, 49, 64), randomImage(rng, 49, 64)}
	var reqs []Request
	for i := range 12 {
		img := images[i%len(images)]
		if i%4 == 3 {
			img.ContentHash = ""
		}
		reqs = append(reqs, Request{Prompt: fmt.Sprintf("Question %d about <image>", i%2), Images: []Image{img}})
	}
	var want []answer
	for _, r := range reqs {
		want = append(want, generate(t, New(Config{}), r))
	}
	m := New(Config{PrefixCacheEntries: 4})
	got := make([]answer, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() { got[i], errs[i] = tryGenerate(m, r) })
	}
	wg.Wait()
	for i := range reqs {
		if errs[i] != nil || !slices.Equal(got[i].tokens, want[i].tokens) || got[i].res != want[i].res {
			t.Errorf("request %d concurrently: %q %+v %v; sequentially %q %+v", i, got[i].text, got[i].res, errs[i], want[i].text, want[i].res)
		}
	}
}

// TestDefaultPrefixKeyGolden pins the prefix-cache key's pre-image (domain
// tag, uvarint-counted little-endian token ids, uvarint-length-prefixed
// identities): keys computed before and after a rewrite are equal.
func TestDefaultPrefixKeyGolden(t *testing.T) {
	long := make([]uint32, 300) // over the stack buffer
	for i := range long {
		long[i] = uint32(i * 7919)
	}
	for _, c := range []struct {
		ids        []uint32
		identities []string
		want       string
	}{
		{nil, nil, "da041634908532e756e44f4be0abd88efa9e5608a4496c311dea15c2ab99d394"},
		{[]uint32{1, 201, 202, 70000}, []string{strings.Repeat("ab", 32), FreshIdentityPrefix + strings.Repeat("cd", 16)}, "59a836612910f92a787481b7071d1bc664698687848fc1dfe92c010f16d410ac"},
		{long, []string{strings.Repeat("x", 200)}, "932d9b4c1996b2f729ee4908e9fd473a7b804803d1093dda5cae515e9f5920f6"},
	} {
		if got := DefaultPrefixKey(c.ids, c.identities); got != c.want {
			t.Errorf("DefaultPrefixKey(%d ids, %d identities) = %s, want %s", len(c.ids), len(c.identities), got, c.want)
		}
	}
}
