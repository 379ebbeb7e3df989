package main

import (
	"go/ast"
	"go/token"
	"path"
	"sort"
	"strings"
)

// calleeDepth is how far propActions follows an action's calls into the
// package's own functions looking for the rules its failures name.
const calleeDepth = 2

// maxHelperCallers: a function called from more package functions than
// this is a shared helper, whose rules rulesReached does not attribute to
// every action calling it.
const maxHelperCallers = 2

// propActions finds the handoff property's actions and scenarios in
// conformance/props: the entries of every map[string]func(*rapid.T)
// literal or assignment into one ("consume": m.consume), and the
// {"name", (*machine).check} pairs of its input and media kinds. An
// action's rules are those its function (and the package's functions it
// calls, calleeDepth deep) names in string literals: its failure messages
// ("want INVALID_ARGUMENT before any token (SU-2)").
func propActions(root string, known map[string]bool) (map[string][]PropAction, error) {
	pkg, err := loadPkg(root, "conformance/props")
	if err != nil {
		return nil, err
	}
	out := map[string][]PropAction{}
	seen := map[string]bool{}
	type actionRoot struct {
		name, at string
		body     ast.Node
	}
	var roots []actionRoot
	add := func(file string, pos token.Pos, name string, fn ast.Expr) {
		reg, ok := pkg.enclosing(file, pos)
		if !ok {
			return
		}
		at, body := propTarget(pkg, reg, fn)
		if body == nil {
			return
		}
		if name == "" {
			name = "(invariant, after every action)"
		}
		roots = append(roots, actionRoot{name, at, body})
		for rule := range rulesReached(pkg, body, known) {
			a := PropAction{Action: name, At: at, Registered: reg.Place()}
			key := rule + "\x00" + a.Action + "\x00" + a.At + "\x00" + a.Registered
			if !seen[key] {
				seen[key] = true
				out[rule] = append(out[rule], a)
			}
		}
	}
	for _, file := range pkg.sortedFiles() {
		actionMaps := map[string]bool{} // variables holding action maps in this file
		ast.Inspect(pkg.Files[file], func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.AssignStmt:
				for i, lhs := range x.Lhs {
					if i < len(x.Rhs) && isActionMap(x.Rhs[i]) {
						if id, ok := lhs.(*ast.Ident); ok {
							actionMaps[id.Name] = true
						}
					}
					ix, ok := lhs.(*ast.IndexExpr)
					if !ok || i >= len(x.Rhs) {
						continue
					}
					id, ok := ix.X.(*ast.Ident)
					key, isLit := stringLit(ix.Index)
					if ok && isLit && actionMaps[id.Name] {
						add(file, x.Pos(), key, x.Rhs[i])
					}
				}
			case *ast.CompositeLit:
				if isActionMap(x) {
					for _, el := range x.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if key, ok := stringLit(kv.Key); ok {
								add(file, kv.Pos(), key, kv.Value)
							}
						}
					}
					return true
				}
				// {"name", (*machine).check}: an input or media kind.
				if len(x.Elts) == 2 {
					if key, ok := stringLit(x.Elts[0]); ok && isMethodExpr(x.Elts[1]) {
						add(file, x.Pos(), key, x.Elts[1])
					}
				}
			}
			return true
		})
	}
	// The shared helpers naming rules, with the actions reaching them.
	actionAt := map[string]bool{}
	usedBy := map[*ast.FuncDecl]map[string]bool{}
	for _, r := range roots {
		actionAt[r.at] = true
		for _, f := range pkg.reached(r.body) {
			if usedBy[f.Decl] == nil {
				usedBy[f.Decl] = map[string]bool{}
			}
			usedBy[f.Decl][r.name] = true
		}
	}
	callers := pkg.callerCounts()
	for _, f := range pkg.Funcs {
		if callers[callKey(f)] <= maxHelperCallers || actionAt[f.Place()] || len(usedBy[f.Decl]) == 0 {
			continue
		}
		names := make([]string, 0, len(usedBy[f.Decl]))
		for n := range usedBy[f.Decl] {
			names = append(names, n)
		}
		sort.Strings(names)
		for rule := range rulesInStrings(f.Decl.Body, known) {
			out[rule] = append(out[rule], PropAction{Action: "(shared check)", At: f.Place(), UsedBy: names})
		}
	}
	for _, v := range out {
		sort.Slice(v, func(i, j int) bool {
			if (v[i].Registered == "") != (v[j].Registered == "") {
				return v[i].Registered != ""
			}
			if v[i].Registered != v[j].Registered {
				return v[i].Registered < v[j].Registered
			}
			if v[i].Action != v[j].Action {
				return v[i].Action < v[j].Action
			}
			return v[i].At < v[j].At
		})
	}
	return out, nil
}

// isActionMap reports whether e is a map[string]func(...) literal.
func isActionMap(e ast.Expr) bool {
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		return false
	}
	mt, ok := cl.Type.(*ast.MapType)
	if !ok {
		return false
	}
	k, ok := mt.Key.(*ast.Ident)
	_, fn := mt.Value.(*ast.FuncType)
	return ok && k.Name == "string" && fn
}

// isMethodExpr reports whether e is (*T).m or T.m with T a type name.
func isMethodExpr(e ast.Expr) bool {
	se, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	if p, ok := se.X.(*ast.ParenExpr); ok {
		_, star := p.X.(*ast.StarExpr)
		return star
	}
	return false
}

// propTarget returns the place and body of an action's function: a
// method value or expression of the package (m.consume, (*machine).x), a
// call that builds it (drawScenario(quick): the registering function), or
// a function literal (named by the function registering it).
func propTarget(pkg *pkgAST, reg funcDecl, fn ast.Expr) (string, ast.Node) {
	switch f := fn.(type) {
	case *ast.FuncLit:
		// func(t *rapid.T) { f.faultedConsume(t, x) }: the function it calls.
		if len(f.Body.List) == 1 {
			if es, ok := f.Body.List[0].(*ast.ExprStmt); ok {
				if call, ok := es.X.(*ast.CallExpr); ok {
					if keys := calledNames(call.Fun); len(keys) == 0 {
						var key string
						switch fn := call.Fun.(type) {
						case *ast.Ident:
							key = fn.Name
						case *ast.SelectorExpr:
							key = "." + fn.Sel.Name
						}
						if c := pkg.callees(key); len(c) == 1 && c[0].Decl.Body != nil {
							return c[0].Place(), c[0].Decl.Body
						}
					}
				}
			}
		}
		return reg.Place(), f.Body
	case *ast.SelectorExpr:
		recv := ""
		if p, ok := f.X.(*ast.ParenExpr); ok {
			if st, ok := p.X.(*ast.StarExpr); ok {
				if id, ok := st.X.(*ast.Ident); ok {
					recv = "*" + id.Name
				}
			}
		}
		cands := pkg.byName(f.Sel.Name)
		for _, c := range cands {
			if recv == "" || c.Recv == recv {
				if c.Recv != "" {
					return c.Place(), c.Decl.Body
				}
			}
		}
	case *ast.Ident:
		for _, c := range pkg.byName(f.Name) {
			if c.Recv == "" {
				return c.Place(), c.Decl.Body
			}
		}
	}
	return "", nil
}

// rulesReached returns the rules named in string literals under body and
// in the package functions it calls, calleeDepth deep, leaving out shared
// helpers (functions called from more than maxHelperCallers functions of
// the package: publishing, consuming and their checks, which every action
// goes through) so that an action lists the rules its own scenario checks.
func rulesReached(pkg *pkgAST, body ast.Node, known map[string]bool) map[string]bool {
	out := rulesInStrings(body, known)
	callers := pkg.callerCounts()
	visited := map[*ast.FuncDecl]bool{}
	frontier := []ast.Node{body}
	for d := 0; d < calleeDepth; d++ {
		var next []ast.Node
		for _, n := range frontier {
			for _, name := range calledNames(n) {
				if callers[name] > maxHelperCallers {
					continue
				}
				for _, f := range pkg.callees(name) {
					if visited[f.Decl] || f.Decl.Body == nil {
						continue
					}
					visited[f.Decl] = true
					for r := range rulesInStrings(f.Decl.Body, known) {
						out[r] = true
					}
					next = append(next, f.Decl.Body)
				}
			}
		}
		frontier = next
	}
	return out
}

// reached returns the package functions reachable from body through
// calls (by name), at any depth.
func (p *pkgAST) reached(body ast.Node) []funcDecl {
	var out []funcDecl
	visited := map[*ast.FuncDecl]bool{}
	frontier := []ast.Node{body}
	for len(frontier) > 0 {
		var next []ast.Node
		for _, n := range frontier {
			for _, name := range calledNames(n) {
				for _, f := range p.callees(name) {
					if visited[f.Decl] || f.Decl.Body == nil {
						continue
					}
					visited[f.Decl] = true
					out = append(out, f)
					next = append(next, f.Decl.Body)
				}
			}
		}
		frontier = next
	}
	return out
}

// callKey is the calledNames key of calls to f.
func callKey(f funcDecl) string {
	if f.Recv != "" {
		return "." + f.Name
	}
	return f.Name
}

// callerCounts returns, for each calledNames key, how many of the
// package's functions make such a call.
func (p *pkgAST) callerCounts() map[string]int {
	if p.callers != nil {
		return p.callers
	}
	p.callers = map[string]int{}
	for _, f := range p.Funcs {
		if f.Decl.Body == nil {
			continue
		}
		for _, name := range calledNames(f.Decl.Body) {
			p.callers[name]++
		}
	}
	return p.callers
}

// simCheckers finds the simulator's checkers of each rule in sim/: the
// world.Checker{Rule, Check} registrations, the (rule, err) returns of ruled
// checks, failf(verdict, rule, ...) calls, and the executor world's errors
// that start with rule IDs ("C-3 the storage of batch ..."). A rule found
// in `if err := f(w); err != nil { return "X-2", err }` (or failf) belongs
// to f; otherwise to the function it is written in.
func simCheckers(root string, known map[string]bool) (map[string][]string, error) {
	pkg, err := loadPkg(root, "sim", "sim/world", "sim/checks", "sim/nodes", "sim/executorworld")
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]bool{}
	add := func(rule, place string) {
		if !known[rule] || place == "" {
			return
		}
		if out[rule] == nil {
			out[rule] = map[string]bool{}
		}
		out[rule][place] = true
	}
	placeOf := func(name string) string {
		for _, f := range pkg.byName(name) {
			if f.Recv == "" {
				return f.Place()
			}
		}
		return ""
	}
	for _, file := range pkg.sortedFiles() {
		f := pkg.Files[file]
		// owner maps a rule literal's position to the checker it belongs to
		// when written in `if msg := check(w); msg != "" { ... }`.
		var ifInits []*ast.IfStmt
		ast.Inspect(f, func(n ast.Node) bool {
			if is, ok := n.(*ast.IfStmt); ok {
				ifInits = append(ifInits, is)
			}
			return true
		})
		owner := func(pos token.Pos) string {
			best := ""
			for _, is := range ifInits {
				if is.Body.Pos() > pos || pos >= is.Body.End() {
					continue
				}
				as, ok := is.Init.(*ast.AssignStmt)
				if !ok || len(as.Rhs) != 1 {
					continue
				}
				call, ok := as.Rhs[0].(*ast.CallExpr)
				if !ok {
					continue
				}
				if id, ok := call.Fun.(*ast.Ident); ok {
					if p := placeOf(id.Name); p != "" {
						best = p // innermost wins: Inspect visits outer first
					}
				}
			}
			if best != "" {
				return best
			}
			if fd, ok := pkg.enclosing(file, pos); ok {
				return fd.Place()
			}
			return ""
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				checkerLits(x, func(rule, check string) { add(rule, placeOf(check)) })
			case *ast.ReturnStmt:
				if len(x.Results) == 2 {
					if rule, ok := stringLit(x.Results[0]); ok {
						add(rule, owner(x.Pos()))
					}
				}
			case *ast.CallExpr:
				se, ok := x.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch {
				case (se.Sel.Name == "failf" || se.Sel.Name == "Failf") && len(x.Args) >= 2:
					if rule, ok := stringLit(x.Args[1]); ok {
						add(rule, owner(x.Pos()))
					}
				case se.Sel.Name == "Errorf" && len(x.Args) >= 1 && strings.HasPrefix(file, "sim/executorworld/"):
					// Only the executor world's errors: sim's own checkers
					// return errors too (checker.check), whose rule is the
					// registration's or the ruled return's, not a leading word.
					if msg, ok := stringLit(x.Args[0]); ok {
						lead, _, _ := strings.Cut(msg, " ")
						for _, rule := range strings.Split(lead, "/") {
							if ruleIDPattern.MatchString(rule) {
								add(rule, owner(x.Pos()))
							}
						}
					}
				}
			}
			return true
		})
	}
	// Rule tables: package variables whose literal pairs rules with data
	// ({"L-1", resTooLarge}); the checkers (in check_*.go files) reading
	// one check its rules.
	for _, file := range pkg.sortedFiles() {
		for _, d := range pkg.Files[file].Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if len(vs.Names) != 1 || len(vs.Values) != 1 {
					continue
				}
				rules := tableRules(vs.Values[0], known)
				if len(rules) == 0 {
					continue
				}
				for _, f := range pkg.Funcs {
					if strings.HasPrefix(path.Base(f.File), "check_") && f.Decl.Body != nil && mentions(f.Decl.Body, vs.Names[0].Name) {
						for _, r := range rules {
							add(r, f.Place())
						}
					}
				}
			}
		}
	}
	res := map[string][]string{}
	for rule, places := range out {
		for p := range places {
			res[rule] = append(res[rule], p)
		}
		sort.Strings(res[rule])
	}
	return res, nil
}

// tableRules returns the rules of a rule table literal: the inner
// composite literals whose first element is a rule ID string ({"L-1", x}).
// Checker literals (world.Checker{...}, []world.Checker) are not tables.
func tableRules(e ast.Expr, known map[string]bool) []string {
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	if at, ok := cl.Type.(*ast.ArrayType); ok && isCheckerType(at.Elt) {
		return nil
	}
	var out []string
	for _, el := range cl.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			el = kv.Value
		}
		inner, ok := el.(*ast.CompositeLit)
		if !ok || len(inner.Elts) == 0 {
			continue
		}
		if rule, ok := stringLit(inner.Elts[0]); ok && known[rule] {
			out = append(out, rule)
		}
	}
	return out
}

// mentions reports whether the identifier name is used under n.
func mentions(n ast.Node, name string) bool {
	found := false
	ast.Inspect(n, func(x ast.Node) bool {
		if id, ok := x.(*ast.Ident); ok && id.Name == name {
			found = true
		}
		return !found
	})
	return found
}

// checkerLits calls found(rule, check) for each checker literal in x:
// world.Checker{Rule: "L-3", Check: checkModality} or, in a []world.Checker literal,
// {"SU-1", checkSingleUse, nil}.
func checkerLits(x *ast.CompositeLit, found func(rule, check string)) {
	one := func(cl *ast.CompositeLit) {
		var rule, check string
		for i, el := range cl.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				k, _ := kv.Key.(*ast.Ident)
				switch {
				case k != nil && k.Name == "Rule":
					rule, _ = stringLit(kv.Value)
				case k != nil && k.Name == "Check":
					if id, ok := kv.Value.(*ast.Ident); ok {
						check = id.Name
					}
				}
				continue
			}
			switch i {
			case 0:
				rule, _ = stringLit(el)
			case 1:
				if id, ok := el.(*ast.Ident); ok {
					check = id.Name
				}
			}
		}
		if rule != "" && check != "" {
			found(rule, check)
		}
	}
	if isCheckerType(x.Type) {
		one(x)
		return
	}
	if at, ok := x.Type.(*ast.ArrayType); ok {
		if isCheckerType(at.Elt) {
			for _, el := range x.Elts {
				if cl, ok := el.(*ast.CompositeLit); ok && cl.Type == nil {
					one(cl)
				}
			}
		}
	}
}

// isCheckerType reports whether t names the simulator's checker type:
// world.Checker, or Checker inside sim/world.
func isCheckerType(t ast.Expr) bool {
	switch t := t.(type) {
	case *ast.Ident:
		return t.Name == "Checker"
	case *ast.SelectorExpr:
		x, ok := t.X.(*ast.Ident)
		return ok && x.Name == "world" && t.Sel.Name == "Checker"
	}
	return false
}
