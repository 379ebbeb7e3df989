package world

import "github.com/baton-dev/baton/engine/handoff"

// The checkers' state a world carries from step to step, so that each
// checker looks only at what changed (World.judged and the signatures
// next to it); package sim/checks reads and updates it.

// judgedLogs counts the entries of each log the answer checks have judged,
// and holds what the incremental step checkers carry from step to step
// (check_buffers.go, check_cancel.go).
type judgedLogs struct {
	takes, recvEnds, upstream, unpublished, probes int

	// pending lists the WRITEs that may still land, in posting order, and
	// writesSeen how many of w.writes were added to it (pendingWrites).
	pending    []*write
	writesSeen int
	// pendingFresh: pending is up to date within the checkStep running now.
	pendingFresh bool
	// undelivered is what checkUndeliveredReleased last found holding.
	undelivered undeliveredSeen
}

// upstreamAnswer is the producer's answer to one TransferEncoderCache
// request (receive number recv), as it left the producer.
type upstreamAnswer struct {
	recv, res int64
}

// probeAnswer is the answer that reached client h for its probe call.
type probeAnswer struct {
	h     int32
	rpc   int64
	probe probeKind
	entry string
	res   int64
}

// checkedCore is the core table a node's last invariant check saw and its
// Version then (a restarted node's new table is a different pointer).
type checkedCore struct {
	table    *handoff.ProducerTable
	receives *handoff.ConsumerReceives
	version  uint64
}

// healthSig is what a node's health is a function of.
type healthSig struct {
	inc                   int64
	quarantined, cleanups int
	draining              bool
}

// cheapCheck is the signature of a node's last cheap health check.
type cheapCheck struct {
	sig  healthSig
	done bool
}

// proofSeen is what checkQuarantineProofs saw at its last look.
type proofSeen struct {
	cons    []consumerProofs
	prod    *producerNode
	sources []*write
	// qver and qlen are E's quarantine version and count at the last look.
	qver, qlen int
}

// undeliveredSeen is the producer table (a restarted producer's is a new
// one), its Version and the length of the cancelled list when
// checkUndeliveredReleased last held.
type undeliveredSeen struct {
	table     *handoff.ProducerTable
	version   uint64
	cancelled int
	held      bool
}

// consumerProofs is one consumer incarnation's quarantines at the last look.
type consumerProofs struct {
	inc     int64
	table   *handoff.ConsumerReceives // the incarnation's (a restart makes a new one)
	version uint64
	held    []heldQuarantine
}

// heldQuarantine is a quarantined receive, the done channel of its
// buffer's revocation (nil: no proof can end it) and the connection that
// carried its request.
type heldQuarantine struct {
	key   string
	proof <-chan struct{}
	// carrier is the consumer's control connection the receive's request
	// went over.
	carrier *ctrlConn
}
