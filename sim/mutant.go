package sim

import (
	"fmt"
	"sort"
	"strings"
)

// Mutant names one broken decision the simulator's driver can make instead
// of the right one (a hook in this package, never in engine/handoff). The
// checkers must catch each; Mutants lists them with the rule each breaks.
type Mutant string

// Mutants.
const (
	// MutantNone is the correct driver.
	MutantNone Mutant = ""
	// MutantConsumerFreesOnTransferError: the consumer ends a transfer whose
	// outcome is uncertain (deadline, UNAVAILABLE, lost reply) with Rejected and
	// frees its buffers for reuse instead of Uncertain + quarantine (breaks Q-1).
	MutantConsumerFreesOnTransferError Mutant = "consumer-frees-on-transfer-error"
	// MutantReadWithoutClaim: the shared-directory consumer reads an entry's
	// file without claiming it by rename, so a replayed reference is consumed
	// twice (breaks SU-1).
	MutantReadWithoutClaim Mutant = "read-without-claim"
	// MutantProducerFreesSourceOnFailure: the producer frees a transfer's
	// source after a failure past the claim instead of quarantining it, while
	// the WRITE may still read it (breaks Q-3).
	MutantProducerFreesSourceOnFailure Mutant = "producer-frees-source-on-failure"
)

// Mutants maps each mutant to the rule it breaks.
var Mutants = map[Mutant]string{
	MutantConsumerFreesOnTransferError: "Q-1",
	MutantReadWithoutClaim:             "SU-1",
	MutantProducerFreesSourceOnFailure: "Q-3",
}

// ParseMutant returns the mutant named s ("" or "none" is MutantNone).
// Error: an unknown name, listing the known ones.
func ParseMutant(s string) (Mutant, error) {
	if s == "" || s == "none" {
		return MutantNone, nil
	}
	if _, ok := Mutants[Mutant(s)]; ok {
		return Mutant(s), nil
	}
	names := make([]string, 0, len(Mutants))
	for m := range Mutants {
		names = append(names, string(m))
	}
	sort.Strings(names)
	return MutantNone, fmt.Errorf("%w: unknown mutant %q (known: %s)", ErrBadSettings, s, strings.Join(names, ", "))
}
