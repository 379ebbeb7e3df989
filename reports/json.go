package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// WriteJSON writes res to path as indented JSON (snake_case keys, the shape
// of Results), creating path's directory if needed. The file is written to a
// temporary name and renamed, so a reader never sees half a report.
func WriteJSON(path string, res Results) error {
	raw, err := json.MarshalIndent(res.normalized(), "", "  ")
	if err != nil {
		return fmt.Errorf("reports: encode %s: %w", path, err)
	}
	return writeFileAtomic(path, append(raw, '\n'))
}

// ReadJSON reads a results file written by WriteJSON. A file that is not
// JSON, has trailing data, or names an outcome outside the five of CONTRACT.md
// is an error (the latter wraps ErrUnknownOutcome).
func ReadJSON(path string) (Results, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Results{}, fmt.Errorf("reports: read results: %w", err)
	}
	return ParseJSON(raw)
}

// ParseJSON decodes a results document (see ReadJSON).
func ParseJSON(raw []byte) (Results, error) {
	var res Results
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&res); err != nil {
		return Results{}, fmt.Errorf("reports: parse results: %w", err)
	}
	if dec.More() {
		return Results{}, fmt.Errorf("reports: parse results: trailing data after the results object")
	}
	return res, nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory and a rename.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("reports: create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("reports: write %s: %w", path, err)
	}
	name := tmp.Name()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(name)
		return fmt.Errorf("reports: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return fmt.Errorf("reports: write %s: %w", path, err)
	}
	if err := os.Chmod(name, 0o644); err != nil {
		os.Remove(name)
		return fmt.Errorf("reports: write %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return fmt.Errorf("reports: write %s: %w", path, err)
	}
	return nil
}

// normalized is res as written: an empty GPU inventory is written as an
// empty list (never null), so results.json and results.yaml agree.
func (r Results) normalized() Results {
	if r.GPU == nil {
		r.GPU = []GPUDevice{}
	}
	return r
}
