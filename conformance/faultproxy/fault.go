package faultproxy

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// ErrInvalidPlan is returned (wrapped, with the offending method and field)
// by Plan.Validate, New and Proxy.SetPlan for a plan that cannot be applied:
// a method key that is not a full gRPC method name, an unknown Fault, a
// FaultDelay without a positive delay, a negative delay, or a probability
// outside [0, 1] or summing above 1.
var ErrInvalidPlan = errors.New("faultproxy: invalid fault plan")

// Fault is what the proxy does to one call. The zero value is FaultNone.
type Fault int

const (
	// FaultNone forwards the call unchanged (transparent passthrough).
	FaultNone Fault = iota
	// FaultDropRequest never forwards the call; the caller's deadline passes
	// (DEADLINE_EXCEEDED), or the call waits until the caller cancels. The
	// upstream is never reached.
	FaultDropRequest
	// FaultDropReply forwards the call, lets the upstream complete (its status
	// is recorded), then never answers: the caller's deadline passes. This is
	// the lost reply after the request took effect (CONTRACT Q-1).
	FaultDropReply
	// FaultDelay forwards the call and holds the reply for Step.Delay after the
	// upstream starts answering; set the delay past the caller's deadline to
	// get DEADLINE_EXCEEDED after the request took effect.
	FaultDelay
	// FaultCutConnection forwards the call, lets the upstream complete, then
	// closes the caller's TCP connection: the caller sees UNAVAILABLE, as do
	// all other calls on that connection.
	FaultCutConnection
	// FaultUnavailable answers UNAVAILABLE at once without forwarding.
	FaultUnavailable
	// FaultInvalidArgument answers INVALID_ARGUMENT at once without
	// forwarding and WITHOUT the `baton-transfer-rejected: before-write`
	// trailer: a rejection a consumer must still treat as uncertain.
	FaultInvalidArgument

	faultCount // number of defined faults; not a fault
)

var faultNames = [...]string{
	FaultNone:            "none",
	FaultDropRequest:     "drop-request",
	FaultDropReply:       "drop-reply",
	FaultDelay:           "delay",
	FaultCutConnection:   "cut-connection",
	FaultUnavailable:     "unavailable",
	FaultInvalidArgument: "invalid-argument",
}

// String returns the fault's kebab-case name ("drop-reply"), or
// "fault(N)" for a value outside the defined ones.
func (f Fault) String() string {
	if f >= 0 && f < faultCount {
		return faultNames[f]
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Reached reports whether a call given this fault is forwarded upstream at
// all (everything but FaultDropRequest, FaultUnavailable and FaultInvalidArgument).
func (f Fault) Reached() bool {
	return f != FaultDropRequest && f != FaultUnavailable && f != FaultInvalidArgument
}

// Step is the decision for one call: a Fault and, for FaultDelay only, how
// long the reply is held (Delay > 0; ignored for other faults).
type Step struct {
	// Fault is what the proxy does to the call; zero is FaultNone.
	Fault Fault
	// Delay is how long a FaultDelay holds the reply, > 0; ignored
	// otherwise.
	Delay time.Duration
}

// String renders the step as "delay(250ms)" or the fault's name.
func (s Step) String() string {
	if s.Fault == FaultDelay {
		return fmt.Sprintf("delay(%s)", s.Delay)
	}
	return s.Fault.String()
}

// Chance is one weighted outcome of a random Rule: Step is chosen with
// Probability (in [0, 1]); the Chances of a Rule sum to at most 1 and the
// remainder is FaultNone.
type Chance struct {
	// Step is the outcome chosen.
	Step Step
	// Probability is the chance Step is chosen, in [0, 1].
	Probability float64
}

// Rule picks the Step of each call of one method from the call's 0-based
// index among that method's calls since the plan was set: index i <
// len(Sequence) gets Sequence[i]; later calls draw from Random with the
// plan's seeded PRNG, or get FaultNone when Random is empty. The zero Rule
// applies no fault. "Call 0 drops the reply, then none" is
// Rule{Sequence: []Step{{Fault: FaultDropReply}}}.
type Rule struct {
	// Sequence gives the Step of the method's first len(Sequence) calls,
	// call i getting Sequence[i].
	Sequence []Step
	// Random is drawn from for every later call (summing to at most 1; the
	// rest is FaultNone); empty: FaultNone.
	Random []Chance
}

// Plan is the proxy's whole fault configuration. Rules is keyed by full
// method name ("/openengine.v1.Control/TransferEncoderCache"); a method with
// no entry follows Default (zero: no fault). Seed drives every random
// decision (Plan.Decide); print it in tests.
type Plan struct {
	// Seed seeds every random draw (Plan.Decide); the same seed gives the
	// same decisions.
	Seed uint64
	// Rules maps a full method name to its Rule.
	Rules map[string]Rule
	// Default is the Rule of every method without an entry in Rules; zero:
	// no fault.
	Default Rule
}

// Validate checks the plan, returning an error wrapping ErrInvalidPlan that
// names the first problem found (method keys are checked in sorted order).
func (pl Plan) Validate() error {
	for _, m := range sortedKeys(pl.Rules) {
		if err := validMethod(m); err != nil {
			return err
		}
		if err := pl.Rules[m].validate(); err != nil {
			return fmt.Errorf("%w: rule for %s: %v", ErrInvalidPlan, m, err)
		}
	}
	if err := pl.Default.validate(); err != nil {
		return fmt.Errorf("%w: default rule: %v", ErrInvalidPlan, err)
	}
	return nil
}

// Decide returns the Step the plan gives to call number index (0-based) of
// method, and whether it came from the seeded PRNG (false: from the fixed
// Sequence, or FaultNone by default). It is a pure function of (Seed,
// method, index): the same seed gives the same decisions in any order of
// calls. A negative index gets FaultNone.
func (pl Plan) Decide(method string, index int) (step Step, random bool) {
	if index < 0 {
		return Step{}, false
	}
	rule, ok := pl.Rules[method]
	if !ok {
		rule = pl.Default
	}
	if index < len(rule.Sequence) {
		return rule.Sequence[index], false
	}
	if len(rule.Random) == 0 {
		return Step{}, false
	}
	u := draw(pl.Seed, method, index)
	cum := 0.0
	for _, c := range rule.Random {
		cum += c.Probability
		if u < cum {
			return c.Step, true
		}
	}
	return Step{}, true
}

// draw returns a uniform value in [0, 1) from a PCG seeded by (seed, hash of
// method mixed with index), so each (method, index) has its own stream.
func draw(seed uint64, method string, index int) float64 {
	h := fnv.New64a()
	h.Write([]byte(method))
	stream := h.Sum64() ^ (uint64(index)+1)*0x9e3779b97f4a7c15
	return rand.New(rand.NewPCG(seed, stream)).Float64()
}

func (r Rule) validate() error {
	for i, s := range r.Sequence {
		if err := s.validate(); err != nil {
			return fmt.Errorf("sequence[%d]: %v", i, err)
		}
	}
	sum := 0.0
	for i, c := range r.Random {
		if err := c.Step.validate(); err != nil {
			return fmt.Errorf("random[%d]: %v", i, err)
		}
		if math.IsNaN(c.Probability) || c.Probability < 0 || c.Probability > 1 {
			return fmt.Errorf("random[%d]: probability %v outside [0, 1]", i, c.Probability)
		}
		sum += c.Probability
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("random probabilities sum to %v > 1", sum)
	}
	return nil
}

func (s Step) validate() error {
	if s.Fault < 0 || s.Fault >= faultCount {
		return fmt.Errorf("unknown fault %s", s.Fault)
	}
	if s.Delay < 0 {
		return fmt.Errorf("negative delay %s", s.Delay)
	}
	if s.Fault == FaultDelay && s.Delay == 0 {
		return fmt.Errorf("fault delay needs a positive Delay")
	}
	return nil
}

// validMethod accepts "/service/method" with both parts non-empty.
func validMethod(m string) error {
	rest, ok := strings.CutPrefix(m, "/")
	svc, name, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || svc == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%w: method key %q is not a full method name like /pkg.Service/Method", ErrInvalidPlan, m)
	}
	return nil
}

// clone deep-copies the plan so a caller's later edits do not reach the proxy.
func (pl Plan) clone() Plan {
	out := Plan{Seed: pl.Seed, Default: pl.Default.clone()}
	if pl.Rules != nil {
		out.Rules = make(map[string]Rule, len(pl.Rules))
		for k, r := range pl.Rules {
			out.Rules[k] = r.clone()
		}
	}
	return out
}

func (r Rule) clone() Rule {
	return Rule{
		Sequence: append([]Step(nil), r.Sequence...),
		Random:   append([]Chance(nil), r.Random...),
	}
}

func sortedKeys(m map[string]Rule) []string {
	return slices.Sorted(maps.Keys(m))
}
