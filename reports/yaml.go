package reports

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

// WriteYAML writes res to path as YAML with the same keys as results.json
// (the yaml tags of Results mirror its json tags), creating path's directory
// if needed; like WriteJSON it writes a temporary file and renames it.
func WriteYAML(path string, res Results) error {
	raw, err := MarshalYAML(res)
	if err != nil {
		return fmt.Errorf("reports: encode %s: %w", path, err)
	}
	return writeFileAtomic(path, raw)
}

// MarshalYAML encodes res as a results.yaml document (two-space indent).
func MarshalYAML(res Results) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(res.normalized()); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadYAML reads a results file written by WriteYAML.
func ReadYAML(path string) (Results, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Results{}, fmt.Errorf("reports: read results: %w", err)
	}
	return ParseYAML(raw)
}

// ParseYAML decodes a results.yaml document. Unknown keys, a second
// document, an empty input, or a missing outcome (the verdict, a level's,
// a rule's or a case's) or one outside the five of CONTRACT.md (the last
// two wrapping ErrUnknownOutcome) are errors.
func ParseYAML(raw []byte) (Results, error) {
	var res Results
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&res); err != nil {
		if errors.Is(err, io.EOF) {
			return Results{}, errors.New("reports: parse results: empty document")
		}
		return Results{}, fmt.Errorf("reports: parse results: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Results{}, errors.New("reports: parse results: more than one YAML document")
	}
	if err := res.checkOutcomes(); err != nil {
		// A null outcome (a null document "&0", "levels: {core: }") skips
		// Outcome's own check and parsed to results that cannot be written
		// back (found by FuzzParseBundleFiles).
		return Results{}, fmt.Errorf("reports: parse results: %w", err)
	}
	return res, nil
}

// checkOutcomes requires every outcome of res, the verdict included, to be
// one of the five (ErrUnknownOutcome).
func (res Results) checkOutcomes() error {
	if !res.Verdict.Valid() {
		return fmt.Errorf("%w: verdict %q", ErrUnknownOutcome, res.Verdict)
	}
	for l, o := range res.Levels {
		if !o.Valid() {
			return fmt.Errorf("%w: level %.40q: %q", ErrUnknownOutcome, l, o)
		}
	}
	for _, r := range res.Rules {
		if !r.Outcome.Valid() {
			return fmt.Errorf("%w: rule %.40q: %q", ErrUnknownOutcome, r.Rule, r.Outcome)
		}
	}
	for _, c := range res.Cases {
		if !c.Outcome.Valid() {
			return fmt.Errorf("%w: case %.80q: %q", ErrUnknownOutcome, c.Name, c.Outcome)
		}
	}
	return nil
}
