package suite

import "slices"

// Consequence is one documented exception to "each case asserts its own
// rule": a case of Rule may also fail, and name Mentions in its failure
// messages, because of a defect Mentions is about, for the reason Why.
// The relation is symmetric (Related): a mutant that breaks Mentions may
// fail Rule's cases, and one that breaks Rule may fail Mentions' cases.
type Consequence struct {
	// Rule and Mentions are CONTRACT rule IDs ("SU-1", "SU-2").
	Rule, Mentions string
	// Why says why a defect about one shows in the other's cases.
	Why string
}

// Consequences returns the documented consequences, sorted by Rule. A
// case's failure may name, and a mutant may fail, only its own rule and
// the rules Related to it; the suite's tests hold every case to that
// (TestFailuresNameOnlyTheirRules), and a kill table attributing a
// mutant's failures can read the same list. It returns a fresh slice.
func Consequences() []Consequence {
	return []Consequence{
		{"B-1", "B-2", "cross-image reuse in the consumer's prefix cache also makes an E+PD answer differ from its baseline"},
		{"B-2", "H-1", "two different images that share a content hash (a hash without their dimensions, or of a sample of their pixels) share the consumer's prefix-cache entry"},
		{"C-3", "SU-3", "the case frees an unconsumed output with Abort, whose answer (ABORTED) is SU-3's"},
		{"C-7", "C-2", "the burst cancels publishes while their encoder step is pending: a late completion that revives one leaves its entry behind"},
		{"C-7", "C-3", "the burst cancels publishes whose output may be ready: an output kept after the cancellation is left behind"},
		{"C-7", "SU-3", "the case releases the references its cancelled clients got after all with Abort, whose answer is SU-3's"},
		{"H-2", "B-2", "H-2's check is cross-image reuse for items without a content hash: a cache keyed by text alone fails it too"},
		{"L-1", "N-1", "only an oversize reference with a backend the consumer does not accept tells the L-1 bound from the SU-4 parse: L-1 decides before N-1"},
		{"N-1", "SU-2", "the precedence N-1 before SU-2 is checked on a spent reference whose backend the consumer does not accept"},
		{"N-1", "SU-4", "the precedence SU-4 before N-1 is checked on a malformed reference whose backend the consumer does not accept"},
		{"H-4", "SU-6", "H-4's pixel-equal pairs are the same media published twice: entries that collide (SU-6) fail its consumes"},
		{"L-5", "SU-6", "the case fills the quota by publishing one image many times: entries of the same media that collide (SU-6) never fill it"},
		{"L-5", "SU-3", "the case frees room under the quota with Abort, whose answer (ABORTED) is SU-3's"},
		{"S-2", "SU-2", "a reference the drain released is rejected with SU-2's code"},
		{"SU-1", "SU-2", "the losers of a race present a reference the winner spent: their code is SU-2's"},
		{"SU-1", "SU-3", "a claim that is not atomic across processes also loses the race against the producer's own claim (Abort), which SU-3 checks"},
		{"SU-3", "SU-2", "an Abort that won its race answers ABORTED, so a consume that still gets tokens is a released reference consumed"},
		{"SU-3", "X-2", "SU-3's answer for an expired reference needs the expiry X-2 defines"},
		{"SU-5", "SU-4", "without a declared reference format the harness cannot tell an alteration that breaks the engine's format (SU-4 decides its code) from one that keeps it (SU-5's); with baton-json-v1 declared the SU-5 cases leave the code of a malformed alteration to SU-4"},
		{"SU-6", "SU-3", "the case releases one of two entries with Abort, whose answer (ABORTED) is SU-3's"},
		{"X-2", "SU-2", "a reference is spent by time only through the expiry X-2 defines, and X-2's consume past the TTL is answered with SU-2's code"},
		{"X-2", "X-1", "a collection that does not tolerate a vanished entry reports a failed cleanup, which X-1 makes sticky"},
	}
}

// Related reports whether a failure of rule's cases may legitimately be
// caused by, or name, other: other is rule itself, or a Consequence pairs
// them (in either order).
func Related(rule, other string) bool {
	if rule == other {
		return true
	}
	return slices.ContainsFunc(Consequences(), func(c Consequence) bool {
		return (c.Rule == rule && c.Mentions == other) || (c.Rule == other && c.Mentions == rule)
	})
}
