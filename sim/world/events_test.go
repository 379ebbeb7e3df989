package world

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// eventSlots are event's kind-specific slots (queue.go): only queue.go and
// events.go (the named payloads) may read or write them; everything else
// goes through a payload type.
var eventSlots = map[string]bool{"h": true, "c": true, "a": true, "b": true, "f": true, "s": true}

// slotFiles may touch the slots: the queue, the payloads, and the queue's
// own tests and benchmark (which push bare events).
var slotFiles = map[string]bool{"queue.go": true, "events.go": true, "queue_test.go": true, "bench_test.go": true}

// TestEventSlotsOnlyThroughPayloads fails on a selector ev.a (etc.) on a
// value of type event or *event, or an event{...} literal that sets a
// slot, outside slotFiles: a handler must say what it reads.
func TestEventSlotsOnlyThroughPayloads(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if slotFiles[name] {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Names declared as event or *event anywhere in the file (params,
		// vars, results); the slots' names are short, so the check keys on
		// the variable's declared type, not on the field name alone.
		evVars := map[*ast.Object]bool{}
		isEventType := func(e ast.Expr) bool {
			if s, ok := e.(*ast.StarExpr); ok {
				e = s.X
			}
			id, ok := e.(*ast.Ident)
			return ok && id.Name == "event"
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				if isEventType(n.Type) {
					for _, id := range n.Names {
						evVars[id.Obj] = true
					}
				}
			case *ast.ValueSpec:
				if n.Type != nil && isEventType(n.Type) {
					for _, id := range n.Names {
						evVars[id.Obj] = true
					}
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && eventSlots[n.Sel.Name] && (evVars[id.Obj] || id.Name == "ev") {
					t.Errorf("%s: %s.%s: read the event through its payload type (events.go)", fset.Position(n.Pos()), id.Name, n.Sel.Name)
				}
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "event" {
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && eventSlots[k.Name] {
								t.Errorf("%s: event{%s: ...}: build the event with its payload type (events.go)", fset.Position(kv.Pos()), k.Name)
							}
						}
					}
				}
			}
			return true
		})
	}
}
