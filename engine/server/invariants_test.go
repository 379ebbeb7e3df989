package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"testing"
)

// coreReads are the exported methods of the lifecycle core's tables that
// change nothing, so the checked tables leave them unwrapped (promoted).
var coreReads = map[string][]string{
	"ProducerTable":    {"Version", "TTL", "Published", "AppendPublished", "State", "Entries", "HeldBytes", "PendingRemovals", "Counters", "Transfers", "DrainDone", "CheckInvariants"},
	"ConsumerReceives": {"Version", "Inflight", "InflightBytes", "Quarantined", "Quarantine", "InflightIDs", "CheckInvariants"},
}

// methodsOf returns the exported methods declared on type recv (pointer or
// value receiver) in the Go files of dir, test files left out.
func methodsOf(t *testing.T, dir, recv string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		if filepath.Ext(f) == ".go" && len(f) > 8 && f[len(f)-8:] == "_test.go" {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || !fd.Name.IsExported() {
				continue
			}
			typ := fd.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			if id, ok := typ.(*ast.Ident); ok && id.Name == recv {
				out = append(out, fd.Name.Name)
			}
		}
	}
	return out
}

// TestCheckedTablesWrapEveryTransition: every exported method of
// handoff.ProducerTable and handoff.ConsumerReceives is either a read
// (coreReads) or wrapped by producer.Table (engine/producer/checked.go) /
// consumer.Receives (engine/consumer/checked.go), so that -tags invariants
// checks after every transition the engine makes; a new transition of the
// core fails this test until it is wrapped (or listed as a read).
func TestCheckedTablesWrapEveryTransition(t *testing.T) {
	type wrapper struct{ dir, typ string }
	for core, w := range map[string]wrapper{
		"ProducerTable":    {filepath.Join("..", "producer"), "Table"},
		"ConsumerReceives": {filepath.Join("..", "consumer"), "Receives"},
	} {
		wrapped := methodsOf(t, w.dir, w.typ)
		if len(wrapped) == 0 {
			t.Fatalf("no methods of %s found in %s: the wrapper moved", w.typ, w.dir)
		}
		for _, m := range methodsOf(t, filepath.Join("..", "handoff"), core) {
			read := slices.Contains(coreReads[core], m)
			if !read && !slices.Contains(wrapped, m) {
				t.Errorf("handoff.%s.%s is neither wrapped by %s (%s) nor listed in coreReads", core, m, w.typ, w.dir)
			}
			if read && slices.Contains(wrapped, m) {
				t.Errorf("handoff.%s.%s is listed as a read and wrapped too", core, m)
			}
		}
	}
}
