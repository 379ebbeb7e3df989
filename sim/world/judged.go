package world

import "github.com/baton-dev/baton/engine/handoff"

// The checkers' state a world carries from step to step, so that each
// checker looks only at what changed (World.judged and the signatures
// next to it); package sim/checks reads and updates it.

// judgedLogs counts the entries of each log the answer checks have judged,
// and holds what the incremental step checkers carry from step to step
// (check_buffers.go, check_cancel.go).
type judgedLogs struct {
	Takes, RecvEnds, Upstream, Unpublished, Probes int
	// Ended counts the ledger's first entries (Ledger.All) found terminal
	// (checkExpiryCollected: an ended entry never expires).
	Ended int
	// ExpiryDue is, at X-2's last scan, the earliest tick after which one
	// of the published entries not yet ended is overdue (its
	// max(ExpiresMs, CommittedMs) plus the collector period), and
	// ExpiryPubs Ledger.Publications then (checkExpiryCollectedScan).
	ExpiryDue  int64
	ExpiryPubs int

	// Pending lists the WRITEs that may still land, in posting order, and
	// writesSeen how many of w.writes were added to it (pendingWrites).
	Pending    []*Write
	WritesSeen int
	// PendingFresh: pending is up to date within the checkStep running now.
	PendingFresh bool
	// Undelivered is what checkUndeliveredReleased last found holding.
	Undelivered UndeliveredSeen
}

// upstreamAnswer is the producer's answer to one TransferEncoderCache
// request (receive number recv), as it left the producer.
type upstreamAnswer struct {
	Recv, Res int64
}

// ProbeAnswer is the answer that reached client h for its probe call.
type ProbeAnswer struct {
	H     int32
	Rpc   int64
	Probe probeKind
	Entry string
	Res   int64
}

// AddProbeAnswer appends a to ProbeAnswers, in the world's probeBuf while
// it has room (appending from nil grew the list once or twice a run).
func (w *World) AddProbeAnswer(a ProbeAnswer) {
	if w.ProbeAnswers == nil {
		w.ProbeAnswers = w.probeBuf[:0]
	}
	w.ProbeAnswers = append(w.ProbeAnswers, a)
}

// CheckedCore is the core table a node's last invariant check saw and its
// Version then (a restarted node's new table is a different pointer).
type CheckedCore struct {
	Table    *handoff.ProducerTable
	Receives *handoff.ConsumerReceives
	Version  uint64
}

// HealthSig is what a node's health is a function of.
type HealthSig struct {
	Inc                   int64
	Quarantined, Cleanups int
	Draining              bool
}

// CheapCheck is the signature of a node's last cheap health check.
type CheapCheck struct {
	Sig  HealthSig
	Done bool
}

// proofSeen is what checkQuarantineProofs saw at its last look.
type proofSeen struct {
	Cons    []ConsumerProofs
	Prod    *producerNode
	Sources []*Write
	// Qver and qlen are E's quarantine version and count at the last look.
	Qver, Qlen int
}

// UndeliveredSeen is the producer table (a restarted producer's is a new
// one), its Version and the length of the cancelled list when
// checkUndeliveredReleased last held.
type UndeliveredSeen struct {
	Table     *handoff.ProducerTable
	Version   uint64
	Cancelled int
	Held      bool
}

// ConsumerProofs is one consumer incarnation's quarantines at the last look.
type ConsumerProofs struct {
	Inc     int64
	Table   *handoff.ConsumerReceives // the incarnation's (a restart makes a new one)
	Version uint64
	Held    []HeldQuarantine
}

// HeldQuarantine is a quarantined receive, the done channel of its
// buffer's revocation (nil: no proof can end it) and the connection that
// carried its request.
type HeldQuarantine struct {
	Key   string
	Proof <-chan struct{}
	// Carrier is the consumer's control connection the receive's request
	// went over.
	Carrier *CtrlConn
}
