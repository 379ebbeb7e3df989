package checks

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/baton-dev/baton/sim/world"
)

// checkQuarantineProofs: Q-6 (and ). A quarantine shrinks only
// with its proof, never because time passed: a consumer's quarantined
// receive leaves the core's quarantine (ConsumerReceives.Quarantined) only
// once the revocation of its buffer is done (the done channel the checker
// took when it first saw the quarantine is closed: no WRITE in flight into
// the buffer, none can land) and the connection that carried its request
// has closed (the consumer retired it and no call uses it any more, or
// either process is gone: carrierClosed); a producer's quarantined source leaves
// E's quarantines only once its WRITE request ended and was released. A
// crashed or restarted process takes its quarantines with it.
//
// The checker keeps what it saw at its last look (proofSeen); a
// consumer whose receive table did not change since (Version) and a
// producer whose quarantines did not change cost one comparison.
func checkQuarantineProofs(w *world.World) error {
	ps := &w.ProofSeen
	if n := len(w.Cons); len(ps.Cons) != n {
		if cap(ps.Cons) >= n { // Run's pooled list (world.go)
			ps.Cons = ps.Cons[:n]
			clear(ps.Cons)
		} else {
			ps.Cons = make([]world.ConsumerProofs, n)
		}
	}
	for i, c := range w.Cons {
		seen := &ps.Cons[i]
		if !c.Up || c.Inc != seen.Inc || c.Receives != seen.Table {
			// A down consumer's seen, once reset, would be reset to the
			// same values every step: it is left as it is.
			if c.Inc != seen.Inc || c.Receives != seen.Table || seen.Version != 0 || len(seen.Held) != 0 {
				*seen = world.ConsumerProofs{Inc: c.Inc, Table: c.Receives, Held: seen.Held[:0]}
			}
			if !c.Up {
				continue
			}
		} else if c.Receives.Version() == seen.Version {
			continue
		}
		for _, q := range seen.Held {
			if c.Receives.Quarantined(q.Key) {
				continue
			}
			if !world.Closed(q.Proof) {
				return fmt.Errorf("PD%d's quarantine of receive %s ended, but the revocation of its buffer is not done: a WRITE may still land (no Q-6 proof)", c.Idx, q.Key)
			}
			if !w.CarrierClosed(q.Carrier) {
				return fmt.Errorf("PD%d's quarantine of receive %s ended while the connection that carried its request is open (E runs and the consumer has not closed it): it may still carry the transfer (no Q-6 proof)", c.Idx, q.Key)
			}
		}
		seen.Held = seen.Held[:0]
		for j := range c.Bufs {
			b := &c.Bufs[j]
			if !b.Quarantined {
				continue
			}
			key := w.Xreqs[b.Owner-1].Key
			if !c.Receives.Quarantined(key) {
				return fmt.Errorf("PD%d's buffer %d is kept quarantined for receive %s, which the core's quarantine does not hold", c.Idx, j, key)
			}
			seen.Held = append(seen.Held, world.HeldQuarantine{Key: key, Proof: b.Revoked, Carrier: w.Xreqs[b.Owner-1].Carrier})
		}
		seen.Version = c.Receives.Version()
	}
	p := w.Prod
	if p != ps.Prod || w.Nodes.ProdDown || p.Stopped {
		ps.Prod, ps.Sources, ps.Qver, ps.Qlen = p, ps.Sources[:0], -1, 0
	}
	if w.Nodes.ProdDown || p.Stopped || (p.Qver == ps.Qver && len(p.Quarantines) == ps.Qlen) {
		return nil
	}
	for _, wr := range ps.Sources {
		if p.Quarantines[wr.Entry] != wr && !wr.Released {
			return fmt.Errorf("E's quarantine of the source of %s ended while its WRITE #%d had not ended (no Q-6 proof)", world.Short(wr.Entry), wr.Num)
		}
	}
	ps.Sources = ps.Sources[:0]
	for _, wr := range p.Quarantines {
		ps.Sources = append(ps.Sources, wr)
	}
	slices.SortFunc(ps.Sources, func(a, b *world.Write) int { return cmp.Compare(a.Num, b.Num) }) // numbers are unique
	ps.Qver, ps.Qlen = p.Qver, len(p.Quarantines)
	return nil
}

// checkProofsHonoured: Q-6 at the end of a converged run. A quarantine
// whose proof came has ended: no consumer buffer is still quarantined once
// the revocation of its registration is done and the connection that
// carried its request closed, and E keeps no source
// quarantined once its WRITE request ended and was released (the
// NeverEndQuarantine mutant keeps them for the life of the process).
func checkProofsHonoured(w *world.World) error {
	for _, c := range w.Cons {
		if !c.Up {
			continue
		}
		for i := range c.Bufs {
			b := &c.Bufs[i]
			if b.Quarantined && b.Revoked != nil && w.ReceiveProved(b.Revoked, b.Carrier) {
				return fmt.Errorf("PD%d's buffer %d is still quarantined for receive %s although the revocation of its registration is done and the connection that carried its request closed: no WRITE can land, so the quarantine should have ended and Health recovered",
					c.Idx, i, w.Xreqs[b.Owner-1].Key)
			}
		}
	}
	if p := w.Prod; !w.Nodes.ProdDown && !p.Stopped && len(p.Quarantines) > 0 {
		for _, wr := range w.Writes { // in WRITE order: the same message on every run
			if p.Quarantines[wr.Entry] == wr && wr.Released {
				return fmt.Errorf("E still quarantines the source of %s although its WRITE #%d ended and was released: nothing reads it, so the quarantine should have ended and Health recovered", world.Short(wr.Entry), wr.Num)
			}
		}
	}
	return nil
}

// checkCarriersRetired: Q-6 once every client is done and before the
// nodes shut down (World.SettledStep). A consumer quarantine whose
// registration's revocation is done, and whose carrier no call of the
// consumer uses any more, has ended, although E may live on: closing the
// connection that carried the uncertain request is the consumer's own part
// of the proof (the core decides it retires it, handoff
// ReceiveDecision.RetireCarriers), and an idle connection to a live E
// never closes by itself. The KeepCarrierOpen mutant keeps it open, so its
// quarantine lasts while E lives. The suite's case "Q-6 a consumer's
// quarantine ends while the producer that hung recovers and lives on"
// makes the same demand of a real engine.
func checkCarriersRetired(w *world.World) error {
	if w.SettledStep != w.Steps {
		return nil // nothing new to judge (the scan would find nothing)
	}
	return checkCarriersRetiredScan(w)
}

// checkCarriersRetiredScan is checkCarriersRetired's scan, once there is something to look at.
func checkCarriersRetiredScan(w *world.World) error {
	if w.SettledStep != w.Steps {
		return nil
	}
	for _, c := range w.Cons {
		if !c.Up {
			continue
		}
		for i := range c.Bufs {
			b := &c.Bufs[i]
			if b.Quarantined && b.Revoked != nil && world.Closed(b.Revoked) && w.CarrierIdle(b.Carrier) {
				return fmt.Errorf("every client is done and PD%d's buffer %d is still quarantined for receive %s although the revocation of its registration is done and no call uses the connection that carried its request: the consumer keeps that connection open, so the quarantine lasts for as long as E lives",
					c.Idx, i, w.Xreqs[b.Owner-1].Key)
			}
		}
	}
	return nil
}
