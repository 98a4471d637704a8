package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// compileFuncs are the regexp functions that compile: called during
// package initialisation, they run before main on every start of every
// command (a {1,64} repetition alone is ~900 allocations).
var compileFuncs = map[string]bool{"MustCompile": true, "MustCompilePOSIX": true, "Compile": true, "CompilePOSIX": true}

// TestNoRegexpCompiledAtInit fails when a non-test file of the repository
// (the SDK's module included: dsh links it) compiles a regexp in a
// package-level variable or an init function. Such a regexp is a
// lazyregexp.New instead, compiled on first use: issue 38 moved 35 of them,
// about 10,000 allocations of every start, out of initialisation.
func TestNoRegexpCompiledAtInit(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, problem := range compiledAtInit(rel, src) {
			t.Error(problem)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have seen the module, or the check proves nothing.
	if files < 200 {
		t.Fatalf("walked %d Go files under %s; want the whole repository", files, root)
	}
}

// TestTheInitCheckFindsRegexpsCompiledAtInit feeds the check a file with
// each form it must refuse and each it must let through.
func TestTheInitCheckFindsRegexpsCompiledAtInit(t *testing.T) {
	src := `package x

import (
	re "regexp"
	"sync"
)

var single = re.MustCompile("a")

var (
	grouped, other = 1, re.MustCompilePOSIX("b")
	wrapped        = []*re.Regexp{re.MustCompile("c")}
)

var lazy = sync.OnceValue(func() *re.Regexp { return re.MustCompile("ok: compiled on first use") })

var fromInit *re.Regexp

func init() { fromInit, _ = re.Compile("d") }

func match(s string) bool { return re.MustCompile("ok: a function's body").MatchString(s) }
`
	got := compiledAtInit("x/x.go", []byte(src))
	all := strings.Join(got, "\n")
	for _, line := range []string{"x/x.go:8:", "x/x.go:11:", "x/x.go:12:", "x/x.go:19:"} {
		if !strings.Contains(all, line) {
			t.Errorf("check missed %s; reported:\n%s", line, all)
		}
	}
	if len(got) != 4 || strings.Contains(all, "ok:") {
		t.Errorf("check reported %d problems, want 4 (the lazy and in-function compiles are allowed):\n%s", len(got), all)
	}
}

// compiledAtInit returns the places in one Go file that compile a regexp
// during package initialisation: in a package-level variable's value
// (outside function literals, which run later) or in an init function.
func compiledAtInit(path string, src []byte) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return []string{path + ": " + err.Error()}
	}
	pkgName := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "regexp" {
			pkgName = "regexp"
			if imp.Name != nil {
				pkgName = imp.Name.Name
			}
		}
	}
	if pkgName == "" || pkgName == "_" {
		return nil
	}
	var problems []string
	visit := func(root ast.Node) {
		ast.Inspect(root, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkgName && compileFuncs[sel.Sel.Name] {
					pos := fset.Position(n.Pos())
					problems = append(problems, pos.Filename+":"+strconv.Itoa(pos.Line)+": regexp."+sel.Sel.Name+
						" runs at package initialisation, before main on every start; use lazyregexp.New (internal/lazyregexp), compiled on first use")
				}
			}
			return true
		})
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.GenDecl:
			if d.Tok == token.VAR {
				visit(d)
			}
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "init" && d.Body != nil {
				visit(d.Body)
			}
		}
	}
	return problems
}
