package lm

import "testing"

// TestMutantsSwitches: without switches the identity is the content hash
// and the key DefaultPrefixKey; each switch breaks its one decision.
func TestMutantsSwitches(t *testing.T) {
	ids := []uint32{ImageID, 201}
	withHash := []string{"aa"}
	fresh := []string{FreshIdentityPrefix + "01"}
	if got := ImageIdentity("u", "aa", Mutants{}); got != "aa" {
		t.Errorf("ImageIdentity = %q, want the content hash", got)
	}
	if got := ImageIdentity("u", "aa", Mutants{UUIDIdentity: true}); got != "uuid:u" {
		t.Errorf("H-5 switch: ImageIdentity = %q, want uuid:u", got)
	}
	if PrefixKeyWith(ids, withHash, Mutants{}) != DefaultPrefixKey(ids, withHash) {
		t.Error("PrefixKeyWith without switches is not DefaultPrefixKey")
	}
	if PrefixKeyWith(ids, withHash, Mutants{TokensOnlyKey: true}) != PrefixKeyWith(ids, []string{"bb"}, Mutants{TokensOnlyKey: true}) {
		t.Error("B-2 switch: two images with one prompt have different keys")
	}
	if PrefixKeyWith(ids, fresh, Mutants{DropFreshIdentities: true}) != DefaultPrefixKey(ids, nil) {
		t.Error("H-2 switch: a fresh identity is still in the key")
	}
}
