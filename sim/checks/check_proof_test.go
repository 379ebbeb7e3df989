package checks

import (
	"strings"
	"testing"

	"github.com/baton-dev/baton/sim/world"
)

// TestQuarantineEndWithoutProofIsCaught plants the bug check_proof.go
// exists for: a driver that ends a quarantine before its Q-6 proof came
// (a consumer's while the revocation of its buffer waits for a WRITE in
// flight or the connection that carried its request is still open; E's source
// while its WRITE has not ended). It steps seeds
// until a quarantine waits for its proof, ends it there by hand, and
// checkQuarantineProofs must report it; the unplanted runs pass.
func TestQuarantineEndWithoutProofIsCaught(t *testing.T) {
	var consumer, producer string
	for seed := uint64(1); seed <= 3000 && (consumer == "" || producer == ""); seed++ {
		s := world.DrawSettings(seed)
		if s.Backend != world.BackendTransfer {
			continue
		}
		w := world.NewWorld(seed, s, world.Options{})
		w.Start()
		planted := false
		for w.Fail == nil && !planted {
			done, ok := dispatchNext(w)
			if !ok {
				break
			}
			w.CheckStep()
			if w.Fail != nil {
				t.Fatalf("seed %d failed before anything was planted: %s", seed, w.Fail.Msg)
			}
			if consumer == "" {
				for _, c := range w.Cons {
					for i := range c.Bufs {
						b := &c.Bufs[i]
						if !c.Up || !b.Quarantined || b.Revoked == nil || w.ReceiveProved(b.Revoked, b.Carrier) {
							continue
						}
						// The planted bug: end it now, while a WRITE may still land.
						world.Must(c.Receives.EndQuarantine(w.Xreqs[b.Owner-1].Key))
						b.Quarantined, b.Owner, b.Revoked, b.Carrier = false, 0, nil, nil
						consumer, planted = errText(checkQuarantineProofs(w)), true
						if consumer == "" {
							t.Fatalf("seed %d: PD%d's quarantine ended without its proof and checkQuarantineProofs found nothing", seed, c.Idx)
						}
						break
					}
					if planted {
						break
					}
				}
			}
			if !planted && producer == "" && !w.Nodes.ProdDown && !w.Prod.Stopped {
				for id, wr := range w.Prod.Quarantines {
					if wr.Released {
						continue
					}
					delete(w.Prod.Quarantines, id) // the planted bug: the WRITE has not ended
					w.Prod.Qver++
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

// TestQuarantineEndWhileCarrierOpenIsCaught plants the other half of the
// consumer's Q-6 proof: a quarantine whose revocation is done (its WRITE
// landed) ended while the connection that carried its request is still
// open (the consumer retired it, but another call of the consumer is
// outstanding on it: the script of
// testdata/scenarios/quarantine_ends_when_carrier_closes.txt, up to its
// first expect). checkQuarantineProofs must report it; unplanted, the
// same state passes, and once that call ends the proof has come.
func TestQuarantineEndWhileCarrierOpenIsCaught(t *testing.T) {
	sc := world.NewScenario()
	for _, step := range []struct {
		cmd  string
		args map[string]string
	}{
		{"new", map[string]string{"backend": "transfer", "buffers": "2", "consumer-timeout": "200"}},
		{"publish", map[string]string{"h": "0"}}, {"deliver", map[string]string{"until": "ready-arrive"}},
		{"publish", map[string]string{"h": "1"}}, {"deliver", map[string]string{"until": "ready-arrive"}},
		{"claim", map[string]string{"h": "0", "pd": "0"}}, {"deliver", map[string]string{"until": "write-complete"}},
		{"drop-reply", map[string]string{"kind": "transfer-reply"}},
		{"advance", map[string]string{"ms": "100"}},
		{"claim", map[string]string{"h": "1", "pd": "0"}}, {"deliver", map[string]string{"until": "write-complete"}},
		{"delay", map[string]string{"kind": "transfer-reply", "ms": "120"}},
		{"advance", map[string]string{"ms": "100"}},
	} {
		if out := sc.Do(step.cmd, step.args); strings.Contains(out, "CRASH") || strings.Contains(out, "error") {
			t.Fatalf("%s %v: %s", step.cmd, step.args, out)
		}
	}
	w := sc.W
	c := w.Cons[0]
	b := &c.Bufs[0]
	if !b.Quarantined || !world.Closed(b.Revoked) || w.CarrierClosed(b.Carrier) || !b.Carrier.Retired {
		t.Fatalf("PD0's buffer 0: quarantined %v, revocation done %v, carrier closed %v, retired %v; want quarantined, done, a retired carrier still open", b.Quarantined, world.Closed(b.Revoked), w.CarrierClosed(b.Carrier), b.Carrier.Retired)
	}
	if err := checkQuarantineProofs(w); err != nil {
		t.Fatalf("unplanted: %v", err)
	}
	if w.ReceiveProved(b.Revoked, b.Carrier) {
		t.Fatal("receiveProved while another call still uses the carrier; want no proof yet")
	}
	world.Must(c.Receives.EndQuarantine(w.Xreqs[b.Owner-1].Key)) // the planted bug
	b.Quarantined, b.Owner, b.Revoked, b.Carrier = false, 0, nil, nil
	msg := errText(checkQuarantineProofs(w))
	if !strings.Contains(msg, "no Q-6 proof") || !strings.Contains(msg, "connection that carried its request is open") {
		t.Errorf("checkQuarantineProofs after a quarantine ended with its carrier open = %q; want it to name the open connection and the missing Q-6 proof", msg)
	}
}
