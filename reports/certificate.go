package reports

import (
	"fmt"
	"slices"
	"strings"
)

// TopologyLabelPrefix starts a case's topology label ("topology:E+PD").
const TopologyLabelPrefix = "topology:"

// Certificate is the outcome of a certification run (`baton check
// --certify`): whether the run certifies the claimed level, and what it
// covers. CONTRACT section 3 "Outcomes of a check": a certificate lists the
// topologies and backends it covers; not applicable never counts as passed;
// not verifiable is not allowed at a claimed level.
type Certificate struct {
	// Issued is true when every rule of every claimed level passed or is not
	// applicable, and no harness-level case ended in error.
	Issued bool `json:"issued" yaml:"issued"`
	// Level is the level claimed ("core", "lifecycle", "faults").
	Level string `json:"level" yaml:"level"`
	// Levels are the levels the claim covers, lowest first (["core"] for a
	// Core claim; Lifecycle includes Core).
	Levels []string `json:"levels" yaml:"levels"`
	// Topologies are the declared topologies at least one passed case
	// exercised ("E+PD"); a declared topology no case exercised is not
	// covered.
	Topologies []string `json:"topologies" yaml:"topologies"`
	// Backends are the declared backends at least one passed case of the
	// claimed levels handed off over (CaseResult.Backends; "shared_dir"); a
	// declared backend no passed case used is not covered.
	Backends []string `json:"backends" yaml:"backends"`
	// SecurityFeatures are the security features the certificate covers:
	// each feature ("tls", "authorization") whose feature rule (SE-1, SE-2;
	// CONTRACT section 5) ran and passed. Empty when the profile declares
	// none.
	SecurityFeatures []string `json:"security_features" yaml:"security_features"`
	// Reasons say why the certificate was refused, one line per rule or
	// problem ("SU-3 (core) failed: Abort(...) = ABORTED; want
	// ALREADY_FINISHED"); empty when issued.
	Reasons []string `json:"reasons,omitempty" yaml:"reasons,omitempty"`
}

// FeatureRule is a rule checked at every level when the profile declares
// its feature (CONTRACT section 5: SE-1 for "tls", SE-2 for
// "authorization"); conformance/suite.FeatureRules lists them.
type FeatureRule struct {
	// Rule is the rule ID ("SE-1"); Feature the profile feature that brings
	// it in ("tls").
	Rule, Feature string
}

// IssueCertificate decides the certificate of a finished run res for the
// claimed levels (lowest first, the last one being the claim), the
// topologies and backends the profile declares, and the feature rules
// (SecurityFeatures: each feature whose rule passed). It is refused
// (Issued false, Reasons set) when:
//
//   - a claimed level has no verdict in res, or the run was filtered
//     (res.LabelFilter != ""): a partial run certifies nothing;
//   - a rule of a claimed level is failed, error or not verifiable;
//   - a rule-less (harness-level) case ended in error or failed;
//   - no declared topology was exercised by a passed case;
//   - no passed case handed off over a declared backend (any backend,
//     when the profile declares none).
//
// Not-applicable rules are allowed: they are outside the topologies the
// certificate names. The certificate names only the topologies and
// backends passed cases of the claimed levels ran on.
func IssueCertificate(res Results, levels, topologies, backends []string, features ...FeatureRule) Certificate {
	c := Certificate{
		Levels:           append([]string{}, levels...),
		Backends:         []string{},
		Topologies:       []string{},
		SecurityFeatures: []string{},
	}
	if len(levels) > 0 {
		c.Level = levels[len(levels)-1]
	}
	var reasons []string
	if len(levels) == 0 {
		reasons = append(reasons, "no level claimed")
	}
	if strings.TrimSpace(res.LabelFilter) != "" {
		reasons = append(reasons, fmt.Sprintf("the run was filtered (label filter %q); a certification run runs every case", res.LabelFilter))
	}
	for _, l := range levels {
		if _, ok := res.Levels[l]; !ok {
			reasons = append(reasons, fmt.Sprintf("level %s has no verdict in the results", l))
		}
	}
	for _, r := range res.Rules {
		if !slices.Contains(levels, r.Level) {
			continue
		}
		switch r.Outcome {
		case Passed, NotApplicable:
		default:
			reasons = append(reasons, fmt.Sprintf("%s (%s) %s: %s", r.Rule, r.Level, r.Outcome, firstLine(r.Message)))
		}
	}
	for _, cr := range res.Cases {
		if cr.Rule == "" && cr.Outcome != Passed && cr.Outcome != NotApplicable {
			reasons = append(reasons, fmt.Sprintf("%s %s: %s", cr.Name, cr.Outcome, firstLine(cr.Message)))
		}
	}
	for _, t := range topologies {
		for _, cr := range res.Cases {
			if cr.Outcome == Passed && slices.Contains(levels, cr.Level) && slices.Contains(cr.Labels, TopologyLabelPrefix+t) {
				c.Topologies = append(c.Topologies, t)
				break
			}
		}
	}
	if len(c.Topologies) == 0 {
		reasons = append(reasons, fmt.Sprintf("no passed case exercised a declared topology (declared %v)", topologies))
	}
	used := map[string]bool{}
	for _, cr := range res.Cases {
		if cr.Outcome == Passed && slices.Contains(levels, cr.Level) {
			for _, b := range cr.Backends {
				used[b] = true
			}
		}
	}
	if len(backends) == 0 {
		for b := range used {
			c.Backends = append(c.Backends, b)
		}
		slices.Sort(c.Backends)
	}
	for _, b := range backends {
		if used[b] && !slices.Contains(c.Backends, b) {
			c.Backends = append(c.Backends, b)
		}
	}
	if len(c.Backends) == 0 {
		reasons = append(reasons, fmt.Sprintf("no passed case handed off over a declared backend (declared %v)", backends))
	}
	for _, f := range features {
		for _, r := range res.Rules {
			if r.Rule == f.Rule && r.Outcome == Passed && !slices.Contains(c.SecurityFeatures, f.Feature) {
				c.SecurityFeatures = append(c.SecurityFeatures, f.Feature)
			}
		}
	}
	c.Reasons = reasons
	c.Issued = len(reasons) == 0
	return c
}

// Line is the certificate in one terminal line:
//
//	certificate: issued for level core (topologies E+PD; backends shared_dir)
//	certificate: issued for level core (topologies E+PD; backends tcp; security tls, authorization)
//	certificate: refused for level core: SU-3 (core) failed: ...; ...
func (c Certificate) Line() string {
	if c.Issued {
		security := ""
		if len(c.SecurityFeatures) > 0 {
			security = "; security " + listText(c.SecurityFeatures)
		}
		return fmt.Sprintf("certificate: issued for level %s (topologies %s; backends %s%s)", c.Level, listText(c.Topologies), listText(c.Backends), security)
	}
	return fmt.Sprintf("certificate: refused for level %s: %s", c.Level, strings.Join(c.Reasons, "; "))
}

func listText(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
