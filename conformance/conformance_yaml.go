package conformance

import _ "embed" // for the test list

// TestListYAML is conformance.yaml, baton's generated conformance test
// list (package conformance/testlist reads it: testlist.Committed).
//
//go:embed conformance.yaml
var TestListYAML []byte
