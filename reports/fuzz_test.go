package reports

import (
	"testing"
)

// FuzzParseBundleFiles: the parsers of a certification bundle's files
// (results.yaml, results.json, PRODUCT.yaml, SHA256SUMS; `baton report
// verify` reads bundles it is handed) never panic on any bytes, and what
// ParseYAML and ParseSums accept they accept again after re-encoding. The
// seeds (here and under testdata/fuzz/) run with `go test`; `make fuzz`
// fuzzes it for FUZZTIME.
func FuzzParseBundleFiles(f *testing.F) {
	res := Summarize([]CaseResult{{Rule: "SU-2", Name: "SU-2 x", Level: "core", Outcome: Passed}}, map[string][]string{"core": {"SU-2"}})
	if y, err := MarshalYAML(res); err == nil {
		f.Add(y)
	}
	f.Add([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef  results.yaml\n"))
	f.Add([]byte("vendor: x\nproduct: y\n"))
	f.Add([]byte(`{"rules":[{"rule":"SU-2","outcome":"sideways"}]}`))
	f.Add([]byte("a: &a [*a, *a, *a]\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if r, err := ParseYAML(raw); err == nil {
			y, err := MarshalYAML(r)
			if err != nil {
				t.Fatalf("re-encode accepted results.yaml: %v", err)
			}
			if _, err := ParseYAML(y); err != nil {
				t.Fatalf("accepted results.yaml re-encodes to one it refuses: %v", err)
			}
		}
		_, _ = ParseJSON(raw)
		_, _ = ParseProduct(raw)
		if sums, err := ParseSums(raw); err == nil {
			for name, digest := range sums {
				if name == "" || len(digest) != 64 {
					t.Fatalf("accepted sum %q for %q", digest, name)
				}
			}
		}
	})
}
