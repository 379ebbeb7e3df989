package xfer

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentWritesNoLeak: 64 writes into 64 consumer regions at once,
// each from its own producer registration; every byte lands in its own
// region, and at the end every request is released, every registration
// deregistered and both agents' tables are empty.
func TestConcurrentWritesNoLeak(t *testing.T) {
	const writes, size = 64, 32 << 10
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			seed := testSeed(t)
			p := bc.make(t, nil)
			peer := p.connect(t)
			dsts := make([][]byte, writes)
			cregs := make([]*Registration, writes)
			for i := range dsts {
				dsts[i] = filled(size, canary)
				cregs[i] = register(t, p.cons, dsts[i])
			}
			srcs := make([][]byte, writes)
			var wg sync.WaitGroup
			errs := make(chan error, writes)
			for i := range writes {
				srcs[i] = randomBytes(seed+uint64(i), size)
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- func() error {
						preg, err := p.prod.RegisterMemory([][]byte{srcs[i]})
						if err != nil {
							return err
						}
						req, err := p.prod.CreateWrite(preg.Descriptors, peer, cregs[i].Descriptors)
						if err != nil {
							return err
						}
						if _, err := p.prod.Post(req); err != nil {
							return fmt.Errorf("write %d: Post: %w", i, err)
						}
						<-req.Done()
						if st, err := p.prod.Status(req); st != StatusDone || err != nil {
							return fmt.Errorf("write %d: Status = %v, %w", i, st, err)
						}
						if err := p.prod.Release(req); err != nil {
							return err
						}
						return p.prod.Deregister(preg)
					}()
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			for i := range writes {
				if ev := p.event(t); ev.Outcome != InboundLanded {
					t.Fatalf("inbound event %+v", ev)
				}
				if !bytes.Equal(dsts[i], srcs[i]) {
					t.Fatalf("region %d holds other bytes than write %d", i, i)
				}
				if err := p.cons.Deregister(cregs[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.prod.InvalidateRemoteMetadata(peer); err != nil {
				t.Fatal(err)
			}
			mustZero(t, p.prod)
			mustZero(t, p.cons)
		})
	}
}
