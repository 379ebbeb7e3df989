package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ruleIDPattern finds CONTRACT rule IDs in text ("SU-2", "SE-4", "Q-6").
var ruleIDPattern = regexp.MustCompile(`\b(SU|SE|L|N|S|B|H|C|R|X|Q)-[0-9]+\b`)

// funcDecl is one top-level function or method of a parsed package.
type funcDecl struct {
	File string // slash path from the repository root
	Recv string // "" for a function; "*T" or "T" for a method
	Name string
	Decl *ast.FuncDecl
}

// Place is how the index names the function: "dir/file.go:Name" or
// "dir/file.go:(*T).Name".
func (f funcDecl) Place() string { return f.File + ":" + f.Symbol() }

// Symbol is the function's name with its receiver: "Name", "(*T).Name", "T.Name".
func (f funcDecl) Symbol() string {
	switch {
	case f.Recv == "":
		return f.Name
	case strings.HasPrefix(f.Recv, "*"):
		return "(" + f.Recv + ")." + f.Name
	default:
		return f.Recv + "." + f.Name
	}
}

// pkgAST is one package's non-test Go files, parsed.
type pkgAST struct {
	Dir   string
	Fset  *token.FileSet
	Files map[string]*ast.File // slash path from the root -> file
	Funcs []funcDecl

	callers map[string]int // callerCounts, computed once
}

// loadPkg parses the non-test .go files of dir (a slash path from root),
// and of more directories as one package when given (the simulator and its
// executor world).
func loadPkg(root, dir string, more ...string) (*pkgAST, error) {
	p := &pkgAST{Dir: dir, Fset: token.NewFileSet(), Files: map[string]*ast.File{}}
	for _, dir := range append([]string{dir}, more...) {
		paths, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*.go"))
		if err != nil {
			return nil, err
		}
		sort.Strings(paths)
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(p.Fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			rel := dir + "/" + filepath.Base(path)
			p.Files[rel] = f
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					p.Funcs = append(p.Funcs, funcDecl{File: rel, Recv: recvName(fd), Name: fd.Name.Name, Decl: fd})
				}
			}
		}
	}
	if len(p.Files) == 0 {
		return nil, fmt.Errorf("ruleindex: no Go files in %s", dir)
	}
	return p, nil
}

// recvName is a method's receiver type ("*T", "T"), "" for a function.
func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok { // generic receiver
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return star + id.Name
	}
	return star + "?"
}

// byName returns the functions and methods called name.
func (p *pkgAST) byName(name string) []funcDecl {
	var out []funcDecl
	for _, f := range p.Funcs {
		if f.Name == name {
			out = append(out, f)
		}
	}
	return out
}

// enclosing returns the top-level function of file holding pos.
func (p *pkgAST) enclosing(file string, pos token.Pos) (funcDecl, bool) {
	for _, f := range p.Funcs {
		if f.File == file && f.Decl.Pos() <= pos && pos < f.Decl.End() {
			return f, true
		}
	}
	return funcDecl{}, false
}

// sortedFiles returns the package's file paths in order.
func (p *pkgAST) sortedFiles() []string {
	out := make([]string, 0, len(p.Files))
	for f := range p.Files {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// stringLit returns the value of a string literal expression.
func stringLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

// rulesInStrings returns the rule IDs (of known) named in the string
// literals under n.
func rulesInStrings(n ast.Node, known map[string]bool) map[string]bool {
	out := map[string]bool{}
	ast.Inspect(n, func(x ast.Node) bool {
		if e, ok := x.(ast.Expr); ok {
			if s, ok := stringLit(e); ok {
				for _, id := range ruleIDPattern.FindAllString(s, -1) {
					if known[id] {
						out[id] = true
					}
				}
			}
		}
		return true
	})
	return out
}

// calledNames returns the calls made in n, as keys for callees: "f" for
// f(...), ".f" for x.f(...).
func calledNames(n ast.Node) []string {
	seen := map[string]bool{}
	var out []string
	ast.Inspect(n, func(x ast.Node) bool {
		c, ok := x.(*ast.CallExpr)
		if !ok {
			return true
		}
		var key string
		switch fn := c.Fun.(type) {
		case *ast.Ident:
			key = fn.Name
		case *ast.SelectorExpr:
			key = "." + fn.Sel.Name
		}
		if key != "" && !seen[key] {
			seen[key] = true
			out = append(out, key)
		}
		return true
	})
	return out
}

// callees resolves a calledNames key within the package: f(...) calls a
// function (a local variable of that name is not resolved: it is no
// package function), x.f(...) a method.
func (p *pkgAST) callees(key string) []funcDecl {
	name, method := strings.CutPrefix(key, ".")
	var out []funcDecl
	for _, f := range p.byName(name) {
		if (f.Recv != "") == method {
			out = append(out, f)
		}
	}
	return out
}

// findFunc reports whether the Go file at root/place's file declares the
// function of place ("dir/file.go:Name" or "dir/file.go:(*T).Name").
func findFunc(root, place string) error {
	file, sym, ok := strings.Cut(place, ":")
	if !ok {
		return fmt.Errorf("%s: not file:function", place)
	}
	f, err := parseCached(root, file)
	if err != nil {
		return err
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			if (funcDecl{Recv: recvName(fd), Name: fd.Name.Name}).Symbol() == sym {
				return nil
			}
		}
	}
	return fmt.Errorf("%s: no function %s in %s", place, sym, file)
}

// parsed caches parseCached's files: the index names a few dozen files
// hundreds of times.
var parsed = map[string]*ast.File{}

// parseCached parses root/file (a slash path) once.
func parseCached(root, file string) (*ast.File, error) {
	key := filepath.Join(root, filepath.FromSlash(file))
	if f, ok := parsed[key]; ok {
		return f, nil
	}
	src, err := os.ReadFile(key)
	if err != nil {
		return nil, err
	}
	f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	parsed[key] = f
	return f, nil
}
