package sim

import (
	"strings"
	"testing"
)

// TestQuarantineEndWithoutProofIsCaught plants the bug check_proof.go
// exists for: a driver that ends a quarantine before its Q-6 proof came
// (a consumer's while the revocation of its buffer waits for a WRITE in
// flight or the E process its request went to still runs; E's source
// while its WRITE has not ended). It steps seeds
// until a quarantine waits for its proof, ends it there by hand, and
// checkQuarantineProofs must report it; the unplanted runs pass.
func TestQuarantineEndWithoutProofIsCaught(t *testing.T) {
	var consumer, producer string
	for seed := uint64(1); seed <= 3000 && (consumer == "" || producer == ""); seed++ {
		s := DrawSettings(seed)
		if s.Backend != BackendTransfer {
			continue
		}
		w := newWorld(seed, s, Options{})
		w.start()
		planted := false
		for w.fail == nil && !planted {
			ev, ok := w.q.pop()
			if !ok {
				break
			}
			w.now = ev.tick
			w.steps++
			done := w.dispatch(ev)
			w.checkStep()
			if w.fail != nil {
				t.Fatalf("seed %d failed before anything was planted: %s", seed, w.fail.msg)
			}
			if consumer == "" {
				for _, c := range w.cons {
					for i := range c.bufs {
						b := &c.bufs[i]
						if !c.up || !b.quarantined || b.revoked == nil || w.receiveProved(b.revoked, b.carrier) {
							continue
						}
						// The planted bug: end it now, while a WRITE may still land.
						must(c.receives.EndQuarantine(w.xreqs[b.owner-1].key))
						b.quarantined, b.owner, b.revoked, b.carrier = false, 0, nil, nil
						consumer, planted = errText(checkQuarantineProofs(w)), true
						if consumer == "" {
							t.Fatalf("seed %d: PD%d's quarantine ended without its proof and checkQuarantineProofs found nothing", seed, c.idx)
						}
						break
					}
					if planted {
						break
					}
				}
			}
			if !planted && producer == "" && !w.nodes.prodDown && !w.prod.stopped {
				for id, wr := range w.prod.quarantines {
					if wr.released {
						continue
					}
					delete(w.prod.quarantines, id) // the planted bug: the WRITE has not ended
					w.prod.qver++
					producer, planted = errText(checkQuarantineProofs(w)), true
					if producer == "" {
						t.Fatalf("seed %d: E's source quarantine ended without its proof and checkQuarantineProofs found nothing", seed)
					}
					break
				}
			}
			if done {
				break
			}
		}
	}
	if consumer == "" || producer == "" {
		t.Fatalf("no seed of 1..3000 had a consumer quarantine (%q) and a producer one (%q) waiting for a proof", consumer, producer)
	}
	for _, msg := range []string{consumer, producer} {
		if !strings.Contains(msg, "no Q-6 proof") {
			t.Errorf("message %q does not name the missing Q-6 proof", msg)
		}
	}
	t.Logf("consumer: %s", consumer)
	t.Logf("producer: %s", producer)
}

// errText is a checker's message: "" when it holds.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
