package world

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// A run's result must depend only on its seed, settings and mutant: never
// on what an earlier run left in runBufPool. These tests run seeds in
// different orders and interleavings (after mutants, after a run that
// panicked mid-way, after big E+P+D runs) and compare each with the same
// seed run from an empty pool.

type leakOut struct {
	res   Result
	trace []byte
}

func freshPool() { runBufPool = sync.Pool{New: func() any { return new(runBufs) }} }

func leakRun(seed uint64, m Mutant) leakOut {
	var tr bytes.Buffer
	r := RunSeed(seed, Options{Mutant: m, Trace: &tr, KeepHistory: true})
	return leakOut{r, tr.Bytes()}
}

// stripStack drops a crash's stack (addresses differ between runs).
func stripStack(s string) string {
	if i := strings.Index(s, "\ngoroutine "); i >= 0 {
		return s[:i]
	}
	return s
}

func leakDiff(t *testing.T, ctx string, got, want leakOut) {
	t.Helper()
	g, w := got.res, want.res
	g.Failure, w.Failure = stripStack(g.Failure), stripStack(w.Failure)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: seed %d mutant %q: result differs from a fresh pool's:\n got %v %q %q ticks %d events %d hist %d\nwant %v %q %q ticks %d events %d hist %d",
			ctx, g.Seed, g.Mutant, g.Verdict, g.Rule, g.Failure, g.Ticks, g.Events, len(g.History),
			w.Verdict, w.Rule, w.Failure, w.Ticks, w.Events, len(w.History))
		return
	}
	if g.Verdict != Crash && !bytes.Equal(got.trace, want.trace) {
		t.Errorf("%s: seed %d mutant %q: trace differs from a fresh pool's (%d vs %d bytes)", ctx, g.Seed, g.Mutant, len(got.trace), len(want.trace))
	}
}

func TestPoolNoCrossRunLeak(t *testing.T) {
	n := uint64(400)
	if testing.Short() || raceEnabled { // the race detector's share: TestPoolConcurrentRuns
		n = 100
	}
	fresh := map[uint64]leakOut{}
	for s := uint64(1); s <= n; s++ {
		freshPool()
		fresh[s] = leakRun(s, MutantNone)
	}
	// every mutant's first failing seed, fresh
	type ms struct {
		m    Mutant
		seed uint64
	}
	var mut []ms
	mfresh := map[ms]leakOut{}
	for _, m := range sortedMutants() {
		for s := uint64(1); s <= 300; s++ {
			freshPool()
			o := leakRun(s, m)
			if o.res.Verdict != Passed {
				mut = append(mut, ms{m, s})
				mfresh[ms{m, s}] = o
				break
			}
		}
	}
	// forward, reverse, shuffled orders with one pool
	freshPool()
	for s := uint64(1); s <= n; s++ {
		leakDiff(t, "forward", leakRun(s, MutantNone), fresh[s])
	}
	for s := n; s >= 1; s-- {
		leakDiff(t, "reverse", leakRun(s, MutantNone), fresh[s])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	perm := rng.Perm(int(n))
	for _, i := range perm {
		s := uint64(i + 1)
		leakDiff(t, "shuffled", leakRun(s, MutantNone), fresh[s])
	}
	// a mutant's failing run, then a clean one; and mutants after clean runs
	for _, x := range mut {
		if _, ok := fresh[x.seed]; !ok { // past n: a mutant's first failing seed
			freshPool()
			fresh[x.seed] = leakRun(x.seed, MutantNone)
		}
	}
	freshPool()
	for i, x := range mut {
		s := uint64(i%int(n)) + 1
		leakDiff(t, "mutant "+string(x.m), leakRun(x.seed, x.m), mfresh[x])
		leakDiff(t, "after mutant "+string(x.m), leakRun(s, MutantNone), fresh[s])
		leakDiff(t, "after mutant "+string(x.m)+" same seed", leakRun(x.seed, MutantNone), fresh[x.seed])
	}
}

// panicWriter panics once when its count of writes reaches at.
type panicWriter struct {
	n, at int
}

func (p *panicWriter) Write(b []byte) (int, error) {
	p.n++
	if p.n == p.at {
		panic(fmt.Sprintf("planted panic at write %d", p.n))
	}
	return len(b), nil
}

// TestPoolAfterPanicMidRun: a run that panics mid-way (here its trace
// writer, at every point of the run) hands a half-built world back to the
// pool; the next run must not see any of it.
func TestPoolAfterPanicMidRun(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	fresh := map[uint64]leakOut{}
	for _, s := range seeds {
		freshPool()
		fresh[s] = leakRun(s, MutantNone)
	}
	freshPool()
	for _, victim := range seeds {
		steps := int(fresh[victim].res.Events)
		for _, at := range []int{2, 3, 5, steps / 4, steps / 2, steps - 1, steps} {
			if at < 2 {
				continue
			}
			r := RunSeed(victim, Options{Trace: &panicWriter{at: at}, KeepHistory: true})
			if r.Verdict != Crash {
				t.Fatalf("seed %d at %d: verdict %v, want the planted crash", victim, at, r.Verdict)
			}
			for _, s := range seeds {
				leakDiff(t, fmt.Sprintf("after seed %d panicked at write %d", victim, at), leakRun(s, MutantNone), fresh[s])
			}
		}
	}
}

// TestPoolConcurrentRuns: runs on several goroutines sharing the pool give
// what each gives alone.
func TestPoolConcurrentRuns(t *testing.T) {
	n := uint64(200)
	fresh := make([]leakOut, n+1)
	for s := uint64(1); s <= n; s++ {
		freshPool()
		fresh[s] = leakRun(s, MutantNone)
	}
	freshPool()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for s := uint64(1 + g); s <= n; s += 2 {
				o := leakRun(s, MutantNone)
				a, b := o.res, fresh[s].res
				a.Failure, b.Failure = stripStack(a.Failure), stripStack(b.Failure)
				if !reflect.DeepEqual(a, b) || !bytes.Equal(o.trace, fresh[s].trace) {
					mu.Lock()
					bad = append(bad, fmt.Sprint(s))
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("seeds differing when run concurrently: %v", bad)
	}
}

func leakRunS(seed uint64, s Settings, m Mutant) leakOut {
	var tr bytes.Buffer
	r := Run(seed, s, Options{Mutant: m, Trace: &tr, KeepHistory: true})
	return leakOut{r, tr.Bytes()}
}

// bigSettings are runs past the pools' bounds: many handoffs (> 256, the
// pooled maps' bound), many consumers and crashes (> 16 restarts, the
// pooled restarts' bound), every fault on, E+P+D and not.
func bigSettings() []struct {
	seed uint64
	s    Settings
} {
	var out []struct {
		seed uint64
		s    Settings
	}
	for seed := uint64(1); seed <= 24; seed++ {
		s := DrawSettings(seed)
		switch seed % 4 {
		case 0:
			s.Handoffs = 300 + int(seed)*10
		case 1:
			s.Consumers = 20 + int(seed)
			s.Handoffs = 120
		case 2:
			s.Handoffs = 600
			s.Consumers = 8
		case 3:
			s.Handoffs = 40
		}
		if seed%3 == 0 {
			s.Topology = TopologyEPPD
			if s.Decoders < 1 {
				s.Decoders = 2
			}
			if s.KVSessionTTLMs < 1 {
				s.KVSessionTTLMs = 2000
			}
			if s.DecodeTimeoutMs < 1 {
				s.DecodeTimeoutMs = 1000
			}
		}
		s.SafetyTicks *= 4
		s.FireProbability = 0.4
		s.Faults = append([]Site(nil), AllSites...)
		if err := s.Validate(); err != nil {
			continue
		}
		out = append(out, struct {
			seed uint64
			s    Settings
		}{seed, s})
	}
	return out
}

// TestPoolPastBounds: big runs then small ones, small ones then big ones,
// each as from an empty pool.
func TestPoolPastBounds(t *testing.T) {
	big := bigSettings()
	if len(big) < 12 {
		t.Fatalf("only %d big settings valid", len(big))
	}
	smallN := uint64(60)
	if raceEnabled { // 42 s under the detector on 2 loaded cores; its share is TestPoolConcurrentRuns
		big, smallN = big[:3], 15
	}
	bigFresh := make([]leakOut, len(big))
	restarts := 0
	for i, b := range big {
		freshPool()
		bigFresh[i] = leakRunS(b.seed, b.s, MutantNone)
		restarts = max(restarts, bigFresh[i].res.Fired[SiteConsumerCrash])
	}
	t.Logf("most consumer crashes in a run: %d", restarts)
	small := map[uint64]leakOut{}
	for s := uint64(1); s <= smallN; s++ {
		freshPool()
		small[s] = leakRun(s, MutantNone)
	}
	freshPool()
	for i, b := range big {
		leakDiff(t, "big", leakRunS(b.seed, b.s, MutantNone), bigFresh[i])
		for s := uint64(1); s <= smallN; s++ {
			leakDiff(t, fmt.Sprintf("after big %d", i), leakRun(s, MutantNone), small[s])
		}
	}
	for i := len(big) - 1; i >= 0; i-- {
		leakDiff(t, "big after big", leakRunS(big[i].seed, big[i].s, MutantNone), bigFresh[i])
	}
	for _, m := range sortedMutants() {
		for i, b := range big {
			if i%4 != 0 {
				continue
			}
			leakRunS(b.seed, b.s, m)
			leakDiff(t, "big after big mutant "+string(m), leakRunS(big[(i+1)%len(big)].seed, big[(i+1)%len(big)].s, MutantNone), bigFresh[(i+1)%len(big)])
		}
	}
}

// TestPoolAfterOtherOptions: runs with the other options (HistoryOnly,
// which turns the checkers off; Verbose; Coverage; no history kept) leave
// nothing that changes a later plain run.
func TestPoolAfterOtherOptions(t *testing.T) {
	n := uint64(80)
	fresh := map[uint64]leakOut{}
	for s := uint64(1); s <= n; s++ {
		freshPool()
		fresh[s] = leakRun(s, MutantNone)
	}
	freshPool()
	ms := sortedMutants()
	cov := new(Coverage)
	for s := uint64(1); s <= n; s++ {
		var v bytes.Buffer
		other := []Options{{HistoryOnly: true}, {Verbose: &v}, {Coverage: cov}, {}}
		for i, o := range other {
			if i == 0 {
				o.Mutant = ms[int(s)%len(ms)]
				RunSeed(n+1-s, o)
			}
			RunSeed(n+1-s, o)
			leakDiff(t, fmt.Sprintf("after options %d", i), leakRun(s, MutantNone), fresh[s])
		}
	}
}

// sortedMutants is Mutants' names in order: the pool's state after a run
// depends on the runs before it, so the tests run mutants in a fixed order.
func sortedMutants() []Mutant {
	ms := make([]Mutant, 0, len(Mutants))
	for m := range Mutants {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}
