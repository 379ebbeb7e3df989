package xfer

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestRegistrationsRandomOps: random registrations of 1..4 regions,
// deregistrations and revocations, past the scan bound both ways (the map
// made, then most registrations ended): every live region is found by its
// key, every ended one is not, stale handles stay unknown, and nRegions
// counts the live regions.
func TestRegistrationsRandomOps(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		a, err := NewManual(NewManualNetwork(), Options{Name: "A"})
		if err != nil {
			t.Fatal(err)
		}
		c := a.(*core)
		var all []*Registration
		live := map[*Registration]bool{}
		for step := 0; step < 300; step++ {
			switch k := rng.IntN(10); {
			case k < 5 || len(all) == 0:
				n := 1
				if rng.IntN(3) == 0 {
					n = 1 + rng.IntN(4)
				}
				rs := make([][]byte, n)
				for i := range rs {
					rs[i] = make([]byte, 1+rng.IntN(64))
				}
				reg, err := a.RegisterMemory(rs)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, reg)
				live[reg] = true
			default:
				reg := all[rng.IntN(len(all))]
				var err error
				if k < 8 {
					err = a.Deregister(reg)
				} else {
					_, err = a.Revoke(reg)
				}
				if live[reg] != (err == nil) {
					t.Fatalf("seed %d step %d: end of a registration (live %v): %v", seed, step, live[reg], err)
				}
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				live[reg] = false
			}
			c.mu.Lock()
			n := 0
			for _, reg := range all {
				for _, d := range reg.Descriptors {
					r := c.regionByKey(d.RemoteKey)
					if (r != nil) != live[reg] || r != nil && (r.base != d.Address || r.regID != reg.id) {
						c.mu.Unlock()
						t.Fatalf("seed %d step %d: key of a registration (live %v): region %+v", seed, step, live[reg], r)
					}
					if live[reg] {
						n++
					}
				}
			}
			if n != c.nRegions {
				c.mu.Unlock()
				t.Fatalf("seed %d step %d: nRegions %d, live regions %d", seed, step, c.nRegions, n)
			}
			c.mu.Unlock()
		}
	}
}

// TestRegisterConcurrently: concurrent RegisterMemory, Deregister and
// Revoke (run with -race) give distinct handles and keys.
func TestRegisterConcurrently(t *testing.T) {
	a, err := NewManual(NewManualNetwork(), Options{Name: "A"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[*Registration]bool{}
	keys := map[string]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				n := 1 + (i%5)/4*2
				rs := make([][]byte, n)
				for j := range rs {
					rs[j] = make([]byte, 16)
				}
				reg, err := a.RegisterMemory(rs)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[reg] {
					t.Errorf("handle reused")
				}
				seen[reg] = true
				for _, d := range reg.Descriptors {
					if keys[string(d.RemoteKey)] {
						t.Errorf("key reused")
					}
					keys[string(d.RemoteKey)] = true
				}
				mu.Unlock()
				if i%3 == 0 {
					if _, err := a.Revoke(reg); err != nil {
						t.Error(err)
					}
				} else if i%3 == 1 {
					if err := a.Deregister(reg); err != nil {
						t.Error(err)
					}
				}
			}
		}(g)
	}
	wg.Wait()
}
