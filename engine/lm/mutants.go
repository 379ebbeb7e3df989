package lm

import (
	"fmt"
	"strings"
)

// Mutants switches how the model keys an image and its prefix cache to
// deliberately broken decisions, each breaking one rule. The zero value is
// the contract's model. The real engine's test hooks (engine/server
// Hooks.Model, through Config.Mutants) and the simulator's mutants
// (sim.Mutant.ModelDecisions), whose consumer keys its prefix cache with
// these functions, set the same switch, so one broken decision runs in
// both.
type Mutants struct {
	// UUIDIdentity keys an image that has a MediaItem.uuid by the uuid
	// instead of its content hash (ImageIdentity; breaks H-5; conformance
	// h5-uuid-identity, sim uuid-identity).
	UUIDIdentity bool
	// TokensOnlyKey keys the prefix cache by the token ids alone, so two
	// images with one prompt share an answer (PrefixKeyWith; breaks B-2;
	// conformance b2-text-keyed-cache, sim text-keyed-cache).
	TokensOnlyKey bool
	// DropFreshIdentities leaves the fresh identities of images without
	// content hash out of the prefix-cache key, so they are keyed by their
	// placeholder tokens alone (PrefixKeyWith; breaks H-2; conformance
	// h2-missing-hash-keyed-by-tokens, sim missing-hash-keyed-by-tokens).
	DropFreshIdentities bool
}

// ImageIdentity is the identity the model keys an image by (H-1, H-5): its
// content hash ("" when it has none: Prefill then draws a fresh identity,
// H-2), never its MediaItem.uuid. Under m.UUIDIdentity (breaks H-5) an
// image with a uuid is keyed "uuid:" + uuid.
func ImageIdentity(uuid, contentHash string, m Mutants) string {
	if m.UUIDIdentity && uuid != "" {
		return "uuid:" + uuid // the H-5 mutant
	}
	return contentHash
}

// PrefixKeyWith is the prefix-cache key under m: DefaultPrefixKey, or the
// B-2 mutant's key of the token ids alone (TokensOnlyKey, their decimal
// text), or the H-2 mutant's key without the fresh identities
// (DropFreshIdentities).
func PrefixKeyWith(tokenIDs []uint32, imageIdentities []string, m Mutants) string {
	switch {
	case m.TokensOnlyKey:
		return fmt.Sprint(tokenIDs) // the B-2 mutant
	case m.DropFreshIdentities:
		kept := make([]string, 0, len(imageIdentities)) // the H-2 mutant
		for _, id := range imageIdentities {
			if !strings.HasPrefix(id, FreshIdentityPrefix) {
				kept = append(kept, id)
			}
		}
		imageIdentities = kept
	}
	return DefaultPrefixKey(tokenIDs, imageIdentities)
}
