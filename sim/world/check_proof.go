package world

import (
	"fmt"
	"sort"
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
func checkQuarantineProofs(w *World) error {
	ps := &w.proofSeen
	if len(ps.cons) != len(w.cons) {
		ps.cons = make([]consumerProofs, len(w.cons))
	}
	for i, c := range w.cons {
		seen := &ps.cons[i]
		if !c.up || c.inc != seen.inc || c.receives != seen.table {
			*seen = consumerProofs{inc: c.inc, table: c.receives, held: seen.held[:0]}
			if !c.up {
				continue
			}
		} else if c.receives.Version() == seen.version {
			continue
		}
		for _, q := range seen.held {
			if c.receives.Quarantined(q.key) {
				continue
			}
			if !closed(q.proof) {
				return fmt.Errorf("PD%d's quarantine of receive %s ended, but the revocation of its buffer is not done: a WRITE may still land (no Q-6 proof)", c.idx, q.key)
			}
			if !w.carrierClosed(q.carrier) {
				return fmt.Errorf("PD%d's quarantine of receive %s ended while the connection that carried its request is open (E runs and the consumer has not closed it): it may still carry the transfer (no Q-6 proof)", c.idx, q.key)
			}
		}
		seen.held = seen.held[:0]
		for j := range c.bufs {
			b := &c.bufs[j]
			if !b.quarantined {
				continue
			}
			key := w.xreqs[b.owner-1].key
			if !c.receives.Quarantined(key) {
				return fmt.Errorf("PD%d's buffer %d is kept quarantined for receive %s, which the core's quarantine does not hold", c.idx, j, key)
			}
			seen.held = append(seen.held, heldQuarantine{key: key, proof: b.revoked, carrier: w.xreqs[b.owner-1].carrier})
		}
		seen.version = c.receives.Version()
	}
	p := w.prod
	if p != ps.prod || w.nodes.prodDown || p.stopped {
		ps.prod, ps.sources, ps.qver, ps.qlen = p, ps.sources[:0], -1, 0
	}
	if w.nodes.prodDown || p.stopped || (p.qver == ps.qver && len(p.quarantines) == ps.qlen) {
		return nil
	}
	for _, wr := range ps.sources {
		if p.quarantines[wr.entry] != wr && !wr.released {
			return fmt.Errorf("E's quarantine of the source of %s ended while its WRITE #%d had not ended (no Q-6 proof)", short(wr.entry), wr.num)
		}
	}
	ps.sources = ps.sources[:0]
	for _, wr := range p.quarantines {
		ps.sources = append(ps.sources, wr)
	}
	sort.Slice(ps.sources, func(i, j int) bool { return ps.sources[i].num < ps.sources[j].num })
	ps.qver, ps.qlen = p.qver, len(p.quarantines)
	return nil
}

// checkProofsHonoured: Q-6 at the end of a converged run. A quarantine
// whose proof came has ended: no consumer buffer is still quarantined once
// the revocation of its registration is done and the connection that
// carried its request closed, and E keeps no source
// quarantined once its WRITE request ended and was released (the
// NeverEndQuarantine mutant keeps them for the life of the process).
func checkProofsHonoured(w *World) error {
	for _, c := range w.cons {
		if !c.up {
			continue
		}
		for i := range c.bufs {
			b := &c.bufs[i]
			if b.quarantined && b.revoked != nil && w.receiveProved(b.revoked, b.carrier) {
				return fmt.Errorf("PD%d's buffer %d is still quarantined for receive %s although the revocation of its registration is done and the connection that carried its request closed: no WRITE can land, so the quarantine should have ended and Health recovered",
					c.idx, i, w.xreqs[b.owner-1].key)
			}
		}
	}
	if p := w.prod; !w.nodes.prodDown && !p.stopped && len(p.quarantines) > 0 {
		for _, wr := range w.writes { // in WRITE order: the same message on every run
			if p.quarantines[wr.entry] == wr && wr.released {
				return fmt.Errorf("E still quarantines the source of %s although its WRITE #%d ended and was released: nothing reads it, so the quarantine should have ended and Health recovered", short(wr.entry), wr.num)
			}
		}
	}
	return nil
}
