package lsp_test

import (
	stdctx "context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/lsp"
)

// TestAnEditThatBreaksAGoFileGetsGoplsDiagnostic: the edit's result ends
// with the error gopls found, and only the new one: an error the file
// had before the edit is not repeated.
func TestAnEditThatBreaksAGoFileGetsGoplsDiagnostic(t *testing.T) {
	ws := module(t)
	root, svc := mount(t, lsp.Config{Servers: []lsp.Server{goServer(t)}, DiagnosticsWait: 20e9})

	r := call(t, root, svc, ws, "edit", m{"path": "main.go", "old": "Add(1, 2)", "new": "Sub(1, 2)"})
	if r.IsError {
		t.Fatalf("edit failed: %s", r.Content)
	}
	if !strings.Contains(r.Content, "gopls reports 1 new error in main.go:") || !strings.Contains(r.Content, "main.go:6:14: undefined: Sub") {
		t.Fatalf("the edit's result does not carry gopls's diagnostic:\n%s", r.Content)
	}

	// A second break: only the new error is told, not undefined: Sub.
	r = call(t, root, svc, ws, "edit", m{"path": "main.go", "old": "Add(3, 4)", "new": "Mul(3, 4)"})
	if !strings.Contains(r.Content, "undefined: Mul") || strings.Contains(r.Content, "undefined: Sub") {
		t.Fatalf("the second edit must report only its own error:\n%s", r.Content)
	}

	// A fix adds nothing.
	r = call(t, root, svc, ws, "edit", m{"path": "main.go", "old": "Sub(1, 2)", "new": "Add(1, 2)"})
	if strings.Contains(r.Content, "gopls") {
		t.Fatalf("a fix must add no diagnostics:\n%s", r.Content)
	}

	// A new file written broken.
	r = call(t, root, svc, ws, "write", m{"path": "extra.go", "content": "package main\n\nfunc extra() int { return \"no\" }\n"})
	if !strings.Contains(r.Content, "new error in extra.go") || !strings.Contains(r.Content, "extra.go:3:") {
		t.Fatalf("a write of a broken file must carry gopls's diagnostic:\n%s", r.Content)
	}
}

// TestNewErrorsAreCapped: past max_diagnostics the rest are counted.
func TestNewErrorsAreCapped(t *testing.T) {
	ws := module(t)
	root, svc := mount(t, lsp.Config{Servers: []lsp.Server{goServer(t)}, DiagnosticsWait: 20e9, MaxDiagnostics: 2})
	r := call(t, root, svc, ws, "write", m{"path": "many.go", "content": "package main\n\nfunc many() {\n\tone()\n\ttwo()\n\tthree()\n}\n"})
	for _, want := range []string{"gopls reports 3 new errors in many.go:", "many.go:4:2: undefined: one", "many.go:5:2: undefined: two", "... and 1 more"} {
		if !strings.Contains(r.Content, want) {
			t.Fatalf("the result lacks %q:\n%s", want, r.Content)
		}
	}
	if strings.Contains(r.Content, "undefined: three") {
		t.Fatalf("the third error is past the cap:\n%s", r.Content)
	}
}

// TestDisposeStopsTheServers: when the plugin goes, its servers go.
func TestDisposeStopsTheServers(t *testing.T) {
	ws := module(t)
	root, svc := mount(t, lsp.Config{Servers: []lsp.Server{goServer(t)}})
	if r := call(t, root, svc, ws, "lsp_hover", m{"path": "main.go", "line": 6, "symbol": "Add"}); r.IsError {
		t.Fatal(r.Content)
	}
	if n := len(goplsChildren(t)); n != 1 {
		t.Fatalf("want one gopls, have %d", n)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := root.Dispose(ctx); err != nil {
		t.Fatal(err)
	}
	if left := goplsChildren(t); len(left) != 0 {
		t.Fatalf("gopls %v outlived the plugin", left)
	}
}
