package handoff

import (
	"fmt"
	"sort"
	"strconv"
)

// ReceiveState is where one consumer receive stands (CONTRACT section 2):
// PREFLIGHT -> REGISTERED -> REQUESTED -> {SUCCEEDED, REJECTED, UNCERTAIN}.
type ReceiveState int

// Receive states. SUCCEEDED and REJECTED release the buffers; UNCERTAIN
// quarantines them until the backend proves no write can land any more
// (EndQuarantine, CONTRACT Q-6), or for the life of the process.
const (
	ReceivePreflight ReceiveState = iota + 1
	ReceiveRegistered
	ReceiveRequested
	ReceiveSucceeded
	ReceiveRejected
	ReceiveUncertain
)

// ConsumerConfig bounds the consumer.
type ConsumerConfig struct {
	// InflightQuotaBytes bounds the receive bytes in flight (CONTRACT L-5). 0 means no bound.
	InflightQuotaBytes int64
}

type receive struct {
	id           string
	payloadBytes int64
	buffers      int // receive buffers (one per item; SetBuffers), at least 1
	state        ReceiveState
}

// ConsumerReceives is the consumer's table of receives: a pure state machine.
// The caller allocates (and, for NIXL-style backends, registers) buffers only
// after Preflight succeeds, and reports each step's outcome.
//
// Ordering contracts: Preflight BEFORE allocating; Registered after the buffers
// exist; Requested BEFORE the transfer request is sent (from then on a failure
// is uncertain unless it is a definite pre-write rejection, Q-2); exactly one
// of Succeeded, Rejected, Uncertain ends it.
type ConsumerReceives struct {
	cfg               ConsumerConfig
	receives          receiveSet
	quarantined       map[string]*receive // UNCERTAIN receives whose quarantine has not ended
	inflightBytes     int64
	quarantineBuffers int
	quarantineBytes   int64
	succeeded         uint64
	rejected          uint64
	// version counts the calls of mutating methods (Version).
	version uint64
	// slab allocates the receives.
	slab slab[receive]
}

// Version counts the calls of the mutating methods (Preflight, Registered,
// Requested, Succeeded, Rejected, Uncertain): while it is unchanged the
// table is (ProducerTable.Version).
func (c *ConsumerReceives) Version() uint64 { return c.version }

// NewConsumerReceives returns an empty table.
func NewConsumerReceives(cfg ConsumerConfig) *ConsumerReceives {
	return &ConsumerReceives{cfg: cfg} // quarantined: made at its first entry (most tables never quarantine)
}

// Preflight admits a receive of payloadBytes. Errors: ErrQuarantined (Q-4:
// this consumer quarantined buffers earlier), ErrQuotaExceeded (L-5),
// ErrBadRequest for a duplicate id.
func (c *ConsumerReceives) Preflight(id string, payloadBytes int64) error {
	c.version++
	if c.quarantineBuffers > 0 {
		// "Q-4 %d buffers (%d bytes) quarantined; no new handoffs until Q-6 ends the quarantine"
		var buf [128]byte
		b := append(buf[:0], "Q-4 "...)
		b = strconv.AppendInt(b, int64(c.quarantineBuffers), 10)
		b = append(b, " buffers ("...)
		b = strconv.AppendInt(b, c.quarantineBytes, 10)
		b = append(b, " bytes) quarantined; no new handoffs until Q-6 ends the quarantine"...)
		return rejectD(ErrQuarantined, b)
	}
	if c.receives.get(id) != nil {
		return rejectS(ErrBadRequest, "receive ", id, " already in flight", false)
	}
	if c.cfg.InflightQuotaBytes > 0 && c.inflightBytes+payloadBytes > c.cfg.InflightQuotaBytes {
		// "L-5 receiving %d bytes would put %d of %d in flight"
		var buf [128]byte
		b := append(buf[:0], "L-5 receiving "...)
		b = strconv.AppendInt(b, payloadBytes, 10)
		b = append(b, " bytes would put "...)
		b = strconv.AppendInt(b, c.inflightBytes+payloadBytes, 10)
		b = append(b, " of "...)
		b = strconv.AppendInt(b, c.cfg.InflightQuotaBytes, 10)
		b = append(b, " in flight"...)
		return rejectD(ErrQuotaExceeded, b)
	}
	if _, dup := c.quarantined[id]; dup {
		return rejectS(ErrBadRequest, "receive ", id, " is quarantined", false)
	}
	r := c.slab.new()
	*r = receive{id: id, payloadBytes: payloadBytes, buffers: 1, state: ReceivePreflight}
	c.receives.put(r)
	c.inflightBytes += payloadBytes
	return nil
}

func (c *ConsumerReceives) advance(id string, from, to ReceiveState) error {
	c.version++
	r := c.receives.get(id)
	if r == nil || r.state != from {
		return fmt.Errorf("handoff: receive %s cannot go to %d from its state", id, to)
	}
	r.state = to
	return nil
}

// SetBuffers records how many receive buffers (one per item) a receive
// in PREFLIGHT uses, so `encoder.quarantine.buffers` counts buffers, not
// receives (default 1). Errors: n < 1, or a receive not in PREFLIGHT.
func (c *ConsumerReceives) SetBuffers(id string, n int) error {
	c.version++
	r := c.receives.get(id)
	if r == nil || r.state != ReceivePreflight || n < 1 {
		return fmt.Errorf("handoff: receive %s cannot take %d buffers in its state", id, n)
	}
	r.buffers = n
	return nil
}

// Registered records that the receive buffers exist (and are registered).
func (c *ConsumerReceives) Registered(id string) error {
	return c.advance(id, ReceivePreflight, ReceiveRegistered)
}

// Requested records that the transfer request is about to be sent.
func (c *ConsumerReceives) Requested(id string) error {
	return c.advance(id, ReceiveRegistered, ReceiveRequested)
}

// Succeeded ends a receive whose data arrived: the caller uses, then frees the buffers.
func (c *ConsumerReceives) Succeeded(id string) error { return c.finish(id, ReceiveSucceeded) }

// Rejected ends a receive with a definite rejection before any write or
// a failure before the request was sent: the caller frees the buffers.
func (c *ConsumerReceives) Rejected(id string) error { return c.finish(id, ReceiveRejected) }

// Uncertain ends a receive whose outcome is unknown after the request was
// sent: the buffers are quarantined and the caller must never free or
// reuse them until EndQuarantine; health turns NOT_READY. A
// receive not yet REQUESTED sent nothing: it ends REJECTED instead.
func (c *ConsumerReceives) Uncertain(id string) error { return c.finish(id, ReceiveUncertain) }

// EndQuarantine ends the quarantine of an UNCERTAIN receive once the
// backend proved that no write can land in its buffers any more (CONTRACT
// the registration revoked, every connection that carried the
// transfer closed): its buffers and bytes leave the quarantine counters
// and the caller may free them. Never call it because time passed. Error:
// id is not a quarantined receive.
func (c *ConsumerReceives) EndQuarantine(id string) error {
	c.version++
	r, ok := c.quarantined[id]
	if !ok {
		return fmt.Errorf("handoff: receive %s is not quarantined", id)
	}
	delete(c.quarantined, id)
	c.quarantineBuffers -= r.buffers
	c.quarantineBytes -= r.payloadBytes
	return nil
}

func (c *ConsumerReceives) finish(id string, to ReceiveState) error {
	c.version++
	r := c.receives.get(id)
	if r == nil {
		return fmt.Errorf("handoff: receive %s is not in flight", id)
	}
	if to == ReceiveUncertain && r.state != ReceiveRequested {
		// Nothing was sent: the outcome is known, the buffers are ours.
		to = ReceiveRejected
	}
	c.receives.del(id)
	c.inflightBytes -= r.payloadBytes
	switch to {
	case ReceiveSucceeded:
		c.succeeded++
	case ReceiveRejected:
		c.rejected++
	case ReceiveUncertain:
		r.state = ReceiveUncertain
		if c.quarantined == nil {
			c.quarantined = map[string]*receive{}
		}
		c.quarantined[id] = r
		c.quarantineBuffers += r.buffers
		c.quarantineBytes += r.payloadBytes
	}
	return nil
}

// Inflight is the number of receives in flight: `encoder.receives.inflight`.
func (c *ConsumerReceives) Inflight() int { return c.receives.len() }

// InflightBytes is the receive bytes in flight.
func (c *ConsumerReceives) InflightBytes() int64 { return c.inflightBytes }

// Quarantined reports whether receive id is quarantined (UNCERTAIN, its
// quarantine not ended).
func (c *ConsumerReceives) Quarantined(id string) bool {
	_, ok := c.quarantined[id]
	return ok
}

// Quarantine returns `encoder.quarantine.buffers` and `encoder.quarantine.bytes`.
func (c *ConsumerReceives) Quarantine() (buffers int, payloadBytes int64) {
	return c.quarantineBuffers, c.quarantineBytes
}

// InflightIDs returns the ids of receives in flight, sorted.
func (c *ConsumerReceives) InflightIDs() []string {
	ids := make([]string, 0, c.receives.len())
	for _, r := range c.receives.small[:c.receives.n] {
		ids = append(ids, r.id)
	}
	for id := range c.receives.big {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// CheckInvariants: in-flight bytes equal the sum of receives' payloads and
// stay within the quota; the quarantine counters equal the sums over the
// quarantined receives (they shrink only by EndQuarantine, Q-6).
func (c *ConsumerReceives) CheckInvariants() error {
	var sum int64
	for _, r := range c.receives.small[:c.receives.n] {
		sum += r.payloadBytes
	}
	for _, r := range c.receives.big {
		sum += r.payloadBytes
	}
	if sum != c.inflightBytes {
		return fmt.Errorf("handoff: in-flight bytes %d, receives sum to %d", c.inflightBytes, sum)
	}
	var qBuffers int
	var qBytes int64
	for _, r := range c.quarantined {
		qBuffers += r.buffers
		qBytes += r.payloadBytes
	}
	if qBuffers != c.quarantineBuffers || qBytes != c.quarantineBytes {
		return fmt.Errorf("handoff: quarantine counters %d buffers %d bytes, quarantined receives sum to %d, %d", c.quarantineBuffers, c.quarantineBytes, qBuffers, qBytes)
	}
	if c.cfg.InflightQuotaBytes > 0 && c.inflightBytes > c.cfg.InflightQuotaBytes {
		return fmt.Errorf("handoff: L-5 in-flight bytes %d over quota %d", c.inflightBytes, c.cfg.InflightQuotaBytes)
	}
	return nil
}

// receiveSet is the receives in flight by id: the first few in an inline
// array searched in order, more in a map (a consumer has a few in flight
// at once; a map cost a table its header and group allocations; issue
// #16). Once it has spilled into the map it stays there.
type receiveSet struct {
	small [4]*receive // small[:n] while big is nil
	n     int
	big   map[string]*receive
}

// get returns the receive whose id is id, or nil.
func (s *receiveSet) get(id string) *receive {
	if s.big != nil {
		return s.big[id]
	}
	for _, r := range s.small[:s.n] {
		if r.id == id {
			return r
		}
	}
	return nil
}

// put adds r, whose id is not in s.
func (s *receiveSet) put(r *receive) {
	if s.big == nil {
		if s.n < len(s.small) {
			s.small[s.n] = r
			s.n++
			return
		}
		s.big = make(map[string]*receive, 2*len(s.small))
		for i, o := range s.small[:s.n] {
			s.big[o.id] = o
			s.small[i] = nil
		}
		s.n = 0
	}
	s.big[r.id] = r
}

// del removes the receive whose id is id, if any.
func (s *receiveSet) del(id string) {
	if s.big != nil {
		delete(s.big, id)
		return
	}
	for i, r := range s.small[:s.n] {
		if r.id == id {
			s.n--
			s.small[i] = s.small[s.n]
			s.small[s.n] = nil
			return
		}
	}
}

// len is the number of receives in s.
func (s *receiveSet) len() int {
	if s.big != nil {
		return len(s.big)
	}
	return s.n
}
