package world

import (
	"fmt"
	"math/bits"
)

// Coverage of a sweep (issue #17): what the runs reached, not only that
// they passed. Three tables, all counted by the world as it runs and added
// up across runs (Options.Coverage):
//
//   - every fault site: how often it fired and in how many seeds;
//   - every lifecycle point x fault kind: a lifecycle point is the step the
//     world was taking (the event kind being dispatched, e.g. transfer-arrive,
//     write-complete, remove-done, drain-tick; "start" before the first),
//     and each fire is counted at the point it fired in, so the table says
//     that a lost reply hit the transfer reply after a WRITE
//     (write-complete) and not only the consume reply (claim-read);
//   - the "sometimes" states (Antithesis' sometimes-assertions, SometimesStates):
//     interleavings a sweep must reach at least once, else it did not test
//     what matters (a sweep of at least GateMinSeeds seeds fails naming each
//     state it missed).
//
// The counting draws no random number and writes nothing to the trace, so
// no seed's run changes (TestCoverageLeavesTracesAlone); its cost per step
// is one array increment (BenchmarkSimulator).

// GateMinSeeds is the sweep length from which the coverage gate applies:
// a sweep (or a merge of shards) of at least this many seeds fails unless
// every fault site fired and every sometimes state was reached.
const GateMinSeeds = 10000

// SometimesState is an interleaving a sweep must reach at least once.
type SometimesState struct {
	// Name is the state's stable name (results files, the table).
	Name string
	// Rule is the CONTRACT rule the state puts under test.
	Rule string
	// Text says what happened.
	Text string
}

// The sometimes states, by index into runCoverage.sometimes.
const (
	stReplyLostAfterLanding  = iota
	StWriteLandedAfterGiveUp // a WRITE landed after the consumer gave its receive up
	StCancelMidTransfer      // a client cancelled a consume while its transfer was in flight
	StCrashWithReceive
	StShutdownWithHandoff
	StClaimRacesExpiry      // a transfer claim reached E after the entry expired
	StCleanupFailureInDrain // a removal failed while E drained
	stRemovalInsideClaim
	StCrashInsideClaim // a consumer died inside its Claim after the rename
	stClaimInsideClaim
	StWriteRefusedAfterRevoke // a WRITE reached a revoked buffer and was refused
	stQuarantineEndedByProof
	StSourceQuarantineEndedByProof // E's source quarantine ended on its Q-6 proof
	numSometimes
)

// SometimesStates lists every sometimes state, in table order.
var SometimesStates = [numSometimes]SometimesState{
	stReplyLostAfterLanding:  {"xfer.reply-lost-after-write-landed", "Q-1", "a TransferEncoderCache reply was lost after its WRITE had landed in the consumer's buffer"},
	StWriteLandedAfterGiveUp: {"xfer.write-landed-after-consumer-gave-up", "Q-1", "a WRITE landed in a receive buffer after the consumer had ended its receive as uncertain"},
	StCancelMidTransfer:      {"consumer.cancelled-mid-transfer", "C-4", "a client's cancellation reached the consumer while its transfer was in flight"},
	StCrashWithReceive:       {"consumer.crashed-with-receive-in-flight", "Q-4", "a consumer crashed with a receive in flight"},
	StShutdownWithHandoff:    {"producer.shutdown-with-handoff-in-flight", "S-2", "Shutdown was accepted while a publish was encoding or a transfer was claimed"},
	StClaimRacesExpiry:       {"producer.claim-races-expiry", "X-2", "a transfer claim reached the producer after the entry's TTL ran out, though the consumer admitted it before"},
	StCleanupFailureInDrain:  {"producer.cleanup-failure-during-drain", "X-1", "a removal failed with an I/O error while the producer was draining"},
	stRemovalInsideClaim:     {"shareddir.removal-inside-claim", "SU-1", "the producer's Dir.Remove of an entry landed between a consumer's shareddir.Claim open and its rename"},
	StCrashInsideClaim:       {"shareddir.crash-inside-claim", "SU-1", "a consumer died inside shareddir.Claim after its rename won, leaving the claimed file as an orphan"},
	stClaimInsideClaim:       {"shareddir.claim-inside-claim", "SU-1", "another consumer's whole shareddir.Claim of an entry ran between a Claim's open and its rename"},

	// The real xfer agent refuses what a revoked registration would receive (transport.go).
	StWriteRefusedAfterRevoke: {"xfer.write-refused-after-revoke", "Q-6", "a WRITE reached a consumer's xfer agent after it had revoked the quarantined buffer, and was refused before a byte landed"},

	// Quarantines end by proof (quarantine.go).
	stQuarantineEndedByProof:       {"consumer.quarantine-ended-by-proof", "Q-6", "a consumer's quarantine ended once the revocation of its buffer was done (no WRITE in flight, none can land) and the connection that carried its request had closed, and the buffer was freed"},
	StSourceQuarantineEndedByProof: {"producer.quarantine-ended-by-proof", "Q-6", "the producer's source quarantine ended once its WRITE request had ended and was released, and the source was freed"},
}

// Lifecycle points: index 0 is "start" (before the first step), then the
// world's event kinds, then the nodes' (nodes.go); at most 64 (a bit set).
const numPoints = 1 + int(numEventKinds-1) + int(evNodeEnd-evNodeFirst)

// maxSites bounds len(AllSites) (checked at init), so a run's fire table is
// a fixed array inside the World.
const maxSites = 32

var (
	pointOfKind [256]uint8
	pointNames  [numPoints]string
	siteIndex   = map[Site]int{}
)

func init() {
	if len(AllSites) > maxSites || numPoints > 64 {
		panic(fmt.Sprintf("sim: %d fault sites and %d lifecycle points; coverage has room for %d and 64", len(AllSites), numPoints, maxSites))
	}
	for i, s := range AllSites {
		siteIndex[s] = i
	}
	pointNames[0] = "start"
	p := 1
	for k := eventKind(1); k < numEventKinds; k++ {
		pointOfKind[k], pointNames[p] = uint8(p), k.String()
		p++
	}
	for k := evNodeFirst; k < evNodeEnd; k++ {
		pointOfKind[k], pointNames[p] = uint8(p), k.String()
		p++
	}
}

// runCoverage is one run's counts, inside the World (no allocation).
type runCoverage struct {
	// point is the lifecycle point of the step being dispatched.
	point     uint8
	steps     [numPoints]int32
	sometimes [numSometimes]int32
	// fired counts the faults fired by (point, site), one cell per pair
	// that fired, in the order they first fired: a run fires a few faults
	// at a few points, and a full points-by-sites table made every World
	// 5 KB larger (issue #16).
	fired []firedCell
}

// firedCell is how often site (its index) fired at point.
type firedCell struct {
	point, site uint8
	n           int32
}

// step records that the world dispatches an event of kind k.
func (c *runCoverage) step(k eventKind) {
	c.point = pointOfKind[k]
	c.steps[c.point]++
}

// fire records that the site of index i (siteIndex) fired at the current point.
func (c *runCoverage) fire(i uint8) {
	if c != nil {
		for j := range c.fired {
			if f := &c.fired[j]; f.point == c.point && f.site == i {
				f.n++
				return
			}
		}
		c.fired = append(c.fired, firedCell{point: c.point, site: i, n: 1})
	}
}

// Reach records that the world is in sometimes state st.
func (w *World) Reach(st int) { w.cov.sometimes[st]++ }

// coverLostTransferReply: the lost reply answers receive recv; a WRITE of
// that receive that already landed makes it the Q-1 state.
func (w *World) coverLostTransferReply(recv int64) {
	for i := len(w.Writes) - 1; i >= 0; i-- {
		if w.Writes[i].Recv == recv {
			if w.Writes[i].Landed {
				w.Reach(stReplyLostAfterLanding)
			}
			return
		}
	}
}

// Coverage adds up the coverage of runs. Pass one as Options.Coverage and
// each run adds its counts when it ends; it is not safe for concurrent use
// (Explore gives every worker its own and adds them with Add).
type Coverage struct {
	// Runs is the number of runs counted.
	Runs      int64
	steps     [numPoints]int64
	fired     [numPoints][maxSites]int64
	siteSeeds [maxSites]int64
	hits      [numSometimes]int64
	seeds     [numSometimes]int64
}

// addRun adds one finished run (Run calls it; c may be nil).
func (c *Coverage) addRun(w *World) {
	if c == nil {
		return
	}
	c.Runs++
	rc := &w.cov
	for p, n := range rc.steps {
		c.steps[p] += int64(n)
	}
	var sites uint32
	for _, f := range rc.fired {
		c.fired[f.point][f.site] += int64(f.n)
		sites |= 1 << f.site
	}
	for ss := sites; ss != 0; ss &= ss - 1 {
		c.siteSeeds[bits.TrailingZeros32(ss)]++
	}
	for i, n := range rc.sometimes {
		if n != 0 {
			c.hits[i] += int64(n)
			c.seeds[i]++
		}
	}
}

// Add adds o's counts to c.
func (c *Coverage) Add(o *Coverage) {
	if o == nil {
		return
	}
	c.Runs += o.Runs
	for p := range c.steps {
		c.steps[p] += o.steps[p]
		for s := range c.fired[p] {
			c.fired[p][s] += o.fired[p][s]
		}
	}
	for s := range c.siteSeeds {
		c.siteSeeds[s] += o.siteSeeds[s]
	}
	for i := range c.hits {
		c.hits[i] += o.hits[i]
		c.seeds[i] += o.seeds[i]
	}
}

// SiteCoverage is one fault site's row: fires in all, seeds it fired in,
// and fires per lifecycle point (only points where it fired).
type SiteCoverage struct {
	Site    Site
	Fired   int64
	Seeds   int64
	ByPoint map[string]int64
}

// Sites returns every fault site's row, in AllSites order (sites that
// never fired included, with zeros).
func (c *Coverage) Sites() []SiteCoverage {
	out := make([]SiteCoverage, len(AllSites))
	for i, s := range AllSites {
		row := SiteCoverage{Site: s, Seeds: c.siteSeeds[i], ByPoint: map[string]int64{}}
		for p := range c.fired {
			if n := c.fired[p][i]; n != 0 {
				row.Fired += n
				row.ByPoint[pointNames[p]] += n
			}
		}
		out[i] = row
	}
	return out
}

// Points returns the steps taken at every lifecycle point, by name (points
// never reached included, with zero).
func (c *Coverage) Points() map[string]int64 {
	out := make(map[string]int64, numPoints)
	for p, n := range c.steps {
		out[pointNames[p]] += n
	}
	return out
}

// SometimesCoverage is one sometimes state's row: times reached, seeds it
// was reached in.
type SometimesCoverage struct {
	State SometimesState
	Hits  int64
	Seeds int64
}

// Sometimes returns every sometimes state's row, in SometimesStates order.
func (c *Coverage) Sometimes() []SometimesCoverage {
	out := make([]SometimesCoverage, numSometimes)
	for i := range out {
		out[i] = SometimesCoverage{State: SometimesStates[i], Hits: c.hits[i], Seeds: c.seeds[i]}
	}
	return out
}
