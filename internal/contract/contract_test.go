package contract

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// envContract names the contract to compare the copy with (default
// ../shared/spec/CONTRACT.md beside the repository), as the test list's
// TestCommittedListIsCurrent.
const envContract = "BATON_CONTRACT"

// TestCopyIsCurrent: the compiled-in CONTRACT.md is byte-identical to the
// spec (`make verify`; regenerate with go run ./conformance/testlist/gen).
func TestCopyIsCurrent(t *testing.T) {
	p := os.Getenv(envContract)
	if p == "" {
		p = filepath.Join("..", "..", "..", "shared", "spec", "CONTRACT.md")
	}
	spec, err := os.ReadFile(p)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the contract is missing (%v); CI must have ../shared beside the repository or set %s", err, envContract)
		}
		t.Skipf("no contract to compare with (%v); set %s", err, envContract)
	}
	if !bytes.Equal(spec, markdown) {
		t.Errorf("internal/contract/CONTRACT.md differs from %s: run go run ./conformance/testlist/gen", p)
	}
}

// TestCopyParses: every rule of the copy is found, with its text and
// section, and Markdown is a copy.
func TestCopyParses(t *testing.T) {
	rs := Rules()
	for _, id := range []string{"SU-2", "Q-6", "SE-3", "S-1", "X-1"} {
		r, ok := rs[id]
		if !ok || r.Text == "" || r.Section == "" || r.Sentence == "" {
			t.Errorf("Rules()[%s] = %+v, %v; want its text, sentence and section", id, r, ok)
		}
	}
	m := Markdown()
	m[0] ^= 0xff
	if Markdown()[0] == m[0] {
		t.Errorf("Markdown returned the compiled-in slice, not a copy")
	}
}

// TestWireCopyIsCurrent: internal/contract/WIRE.md, the copy a clone
// carries of the wire facts a vendor implements against, is
// ../shared/spec/WIRE.md byte for byte (go run ./conformance/testlist/gen
// writes it; the path is BATON_CONTRACT's directory when that is set).
func TestWireCopyIsCurrent(t *testing.T) {
	p := filepath.Join("..", "..", "..", "shared", "spec", "WIRE.md")
	if c := os.Getenv(envContract); c != "" {
		p = filepath.Join(filepath.Dir(c), "WIRE.md")
	}
	spec, err := os.ReadFile(p)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the wire facts are missing (%v); CI must have ../shared beside the repository or set %s", err, envContract)
		}
		t.Skipf("no wire facts to compare with (%v); set %s", err, envContract)
	}
	copied, err := os.ReadFile("WIRE.md")
	if err != nil || !bytes.Equal(spec, copied) {
		t.Errorf("internal/contract/WIRE.md differs from %s (%v): run go run ./conformance/testlist/gen", p, err)
	}
}
