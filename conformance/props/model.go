package props

import (
	"fmt"
	"slices"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// refState is what the model expects of one published reference
// (CONTRACT section 2, as the client sees it).
type refState int

const (
	// stateLive: published, neither consumed nor released: a consume gets
	// tokens, an Abort answers ABORTED.
	stateLive refState = iota + 1
	// stateConsumed: one consume got tokens (SU-1); a replay is
	// INVALID_ARGUMENT (SU-2), an Abort ALREADY_FINISHED (SU-3).
	stateConsumed
	// stateReleased: an Abort answered ABORTED; a consume is INVALID_ARGUMENT (SU-2).
	stateReleased
	// stateUnknown: an uncertain outcome (a consume cancelled in flight, a
	// producer shut down) may or may not have spent it; the next answer decides.
	stateUnknown
)

// String is the state's name: "live", "consumed", "released" or "unknown"
// (refState(n) for another value).
func (s refState) String() string {
	switch s {
	case stateLive:
		return "live"
	case stateConsumed:
		return "consumed"
	case stateReleased:
		return "released"
	case stateUnknown:
		return "unknown"
	}
	return fmt.Sprintf("refState(%d)", int(s))
}

// spent reports whether a reference in state s can no longer be consumed.
func (s refState) spent() bool { return s == stateConsumed || s == stateReleased }

// refRecord is the model's entry for one reference.
type refRecord struct {
	ref   *pb.EncoderCacheRef
	image int // index into Config.Images
	state refState
	// unobserved: consumed (the shared-directory claim) and not yet looked
	// at by the producer; its table may still count the entry until the
	// next Abort, collection or drain (CONTRACT "Shared-directory backend").
	unobserved bool
}

// model is the expected table of one check.
type model struct {
	refs []*refRecord
	// answers holds the first token ids each image's consume produced: the
	// same image with the same prompt must give the same answer.
	answers map[int][]uint32
	// orphans counts publishes cancelled in flight whose entry, if the
	// producer made one, it must release by itself (C-1, C-7).
	orphans int
	// uncertainConsumes counts consumes cancelled in flight since the last
	// settle: the consumer may still be finishing them.
	uncertainConsumes int
	// down holds the roles that accepted a Shutdown (S-1, S-2).
	down map[string]bool
}

func newModel() *model {
	return &model{answers: map[int][]uint32{}, down: map[string]bool{}}
}

// count returns how many references are in state s.
func (m *model) count(s refState) int {
	n := 0
	for _, r := range m.refs {
		if r.state == s {
			n++
		}
	}
	return n
}

// unobserved counts consumed references the producer may not have seen yet.
func (m *model) unobserved() int {
	n := 0
	for _, r := range m.refs {
		if r.unobserved {
			n++
		}
	}
	return n
}

// in returns the indices of the references whose state is one of states.
func (m *model) in(states ...refState) []int {
	var out []int
	for i, r := range m.refs {
		if slices.Contains(states, r.state) {
			out = append(out, i)
		}
	}
	return out
}

// entriesRange is the range [lo, hi] the producer's encoder.exports.entries
// may take: at least every live reference, at most those plus what it may
// not have noticed yet (claims it has not looked at, unknown outcomes,
// in-flight cancelled publishes).
func (m *model) entriesRange() (lo, hi int) {
	lo = m.count(stateLive)
	return lo, lo + m.unobserved() + m.count(stateUnknown) + m.orphans
}
