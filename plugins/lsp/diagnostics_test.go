package lsp_test

import (
	"strings"
	"testing"

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
