package main

import (
	"go/ast"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-dev/baton/conformance/mutants"
	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/testlist"
	"github.com/baton-dev/baton/sim"
	"github.com/baton-dev/baton/sim/executorworld"
	"gopkg.in/yaml.v3"
)

// root is the repository root, seen from this package's directory.
var root = filepath.Join("..", "..")

// committed reads and decodes conformance/rules.yaml.
func committed(t *testing.T) ([]byte, Index) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "conformance", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var idx Index
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&idx); err != nil {
		t.Fatal(err)
	}
	return raw, idx
}

// TestCommittedIndexIsCurrent: conformance/rules.yaml is exactly what the
// generator produces from the code now.
func TestCommittedIndexIsCurrent(t *testing.T) {
	idx, err := Build(root)
	if err != nil {
		t.Fatalf("%v\n(fix the code or tools/ruleindex/engine.go, then run: make rule-index)", err)
	}
	want, err := Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := committed(t)
	if string(got) == string(want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("conformance/rules.yaml is stale (line %d):\n committed: %s\n generated: %s\nregenerate with: make rule-index", i+1, g, w)
		}
	}
}

// TestIndexPlacesExist: every place the committed index lists exists: each
// function (engine decision, case, action, checker) is declared in the
// file named (go/ast), each case is registered under its rule, each action
// name is a string literal of the file registering it, each mutant is in
// the mutant tables declaring the rule, each simulator mutant is a
// constant of the file named and known to the simulator. And every rule of
// conformance.yaml is indexed, with an engine decision.
func TestIndexPlacesExist(t *testing.T) {
	_, idx := committed(t)
	l, err := testlist.Committed()
	if err != nil {
		t.Fatal(err)
	}
	indexed := map[string]bool{}
	for _, r := range idx.Rules {
		indexed[r.Rule] = true
	}
	for _, r := range l.Rules {
		if !indexed[r.Rule] {
			t.Errorf("rule %s of conformance.yaml is not in the index", r.Rule)
		}
	}
	cases := map[string]string{}
	for _, c := range suite.Cases() {
		cases[c.Name] = c.Rule
	}
	fn := func(rule, what, place string) {
		t.Helper()
		if err := findFunc(root, place); err != nil {
			t.Errorf("%s %s: %v", rule, what, err)
		}
	}
	for _, r := range idx.Rules {
		if len(r.Engine) == 0 {
			t.Errorf("%s: no engine decision", r.Rule)
		}
		for _, p := range r.Engine {
			fn(r.Rule, "engine", p)
		}
		for _, p := range r.EngineMentions {
			fn(r.Rule, "engine mention", p)
		}
		for _, c := range r.Suite {
			if cases[c.Case] != r.Rule {
				t.Errorf("%s: case %q is not a registered case of the rule", r.Rule, c.Case)
			}
			fn(r.Rule, "case "+c.Case, c.At)
		}
		for _, a := range r.Props {
			fn(r.Rule, "props "+a.Action, a.At)
			if a.Registered == "" {
				if a.Action != "(shared check)" || len(a.UsedBy) == 0 {
					t.Errorf("%s: props entry %+v is neither an action nor a shared check", r.Rule, a)
				}
				continue
			}
			fn(r.Rule, "props "+a.Action+" registration", a.Registered)
			if !strings.HasPrefix(a.Action, "(invariant") {
				file, _, _ := strings.Cut(a.Registered, ":")
				if !hasStringLit(t, file, a.Action) {
					t.Errorf("%s: props action %q is not a string literal of %s", r.Rule, a.Action, file)
				}
			}
		}
		for _, p := range r.Sim {
			fn(r.Rule, "sim checker", p)
		}
		for _, m := range r.Mutants {
			mu, err := mutants.ByName(m.Name)
			if err != nil {
				t.Errorf("%s: %v", r.Rule, err)
				continue
			}
			if !mu.Declares(r.Rule) {
				t.Errorf("%s: mutant %s does not declare the rule", r.Rule, m.Name)
			}
			switch {
			case strings.HasPrefix(m.Sim, "n/a (driver): "):
				if mu.Sim != "" {
					t.Errorf("%s: mutant %s has simulator counterpart %s; the index says %q", r.Rule, m.Name, mu.Sim, m.Sim)
				}
			default: // the counterpart breaks the rule the mutant is named after
				checkSimMutant(t, mu.Rule, m.Sim)
			}
		}
		for _, s := range r.SimMutants {
			checkSimMutant(t, r.Rule, s)
		}
	}
}

// checkSimMutant checks an index entry "name (file:Const)": Const is a
// constant of file with value name and the simulator knows name, or
// "executor:name (sim/executorworld/world.go:Mutations)".
func checkSimMutant(t *testing.T, rule, entry string) {
	t.Helper()
	name, place, ok := strings.Cut(strings.TrimSuffix(entry, ")"), " (")
	if !ok {
		t.Errorf("%s: simulator mutant %q is not \"name (file:symbol)\"", rule, entry)
		return
	}
	if exec, ok := strings.CutPrefix(name, "executor:"); ok {
		if _, known := executorworld.Mutations()[exec]; !known {
			t.Errorf("%s: %s is not in executorworld.Mutations", rule, name)
		}
		if err := findFunc(root, place); err != nil {
			t.Errorf("%s: %v", rule, err)
		}
		return
	}
	if got, known := sim.Mutants[sim.Mutant(name)]; !known || got != rule {
		t.Errorf("%s: simulator mutant %s breaks %q in sim.Mutants", rule, name, got)
	}
	file, constName, _ := strings.Cut(place, ":")
	f := parseFile(t, file)
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, id := range vs.Names {
				if id.Name == constName && i < len(vs.Values) {
					v, _ := stringLit(vs.Values[i])
					found = v == name
				}
			}
		}
		return !found
	})
	if !found {
		t.Errorf("%s: no constant %s = %q in %s", rule, constName, name, file)
	}
}

func parseFile(t *testing.T, file string) *ast.File {
	t.Helper()
	f, err := parseCached(root, file)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// hasStringLit reports whether file holds the string literal s.
func hasStringLit(t *testing.T, file, s string) bool {
	t.Helper()
	found := false
	ast.Inspect(parseFile(t, file), func(n ast.Node) bool {
		if e, ok := n.(ast.Expr); ok {
			if v, ok := stringLit(e); ok && v == s {
				found = true
			}
		}
		return !found
	})
	return found
}

// TestFindFuncRejectsMissing: the existence check is not vacuous.
func TestFindFuncRejectsMissing(t *testing.T) {
	if err := findFunc(root, "engine/handoff/producer.go:(*ProducerTable).ClaimForTransfer"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"engine/handoff/producer.go:(*ProducerTable).NoSuchMethod",
		"engine/handoff/producer.go:ProducerTable.ClaimForTransfer", // value receiver: wrong
		"engine/handoff/nosuchfile.go:Claim",
		"engine/handoff/producer.go",
	} {
		if err := findFunc(root, bad); err == nil {
			t.Errorf("findFunc(%q) = nil; want an error", bad)
		}
	}
}
