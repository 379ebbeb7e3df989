package testlist

import "github.com/baton-dev/baton/internal/contract"

// Requirement is one rule's entry of CONTRACT.md section 3
// (`- **SU-2** Presenting a spent reference ...`); see contract.Requirement.
type Requirement = contract.Requirement

// ParseContract extracts every rule entry of CONTRACT.md, in file order
// (contract.Parse).
func ParseContract(md []byte) ([]Requirement, error) { return contract.Parse(md) }

// FirstSentence returns the first sentence of a rule entry
// (contract.FirstSentence).
func FirstSentence(text string) string { return contract.FirstSentence(text) }

// Slug is GitHub's anchor for a markdown heading (contract.Slug).
func Slug(heading string) string { return contract.Slug(heading) }
