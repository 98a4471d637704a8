package lsp

import (
	"strings"
	"testing"

	"go.lsp.dev/protocol"
)

func diag(line uint32, sev protocol.DiagnosticSeverity, msg string) protocol.Diagnostic {
	return protocol.Diagnostic{Range: protocol.Range{Start: protocol.Position{Line: line}}, Severity: sev, Source: "compiler", Message: msg}
}

// TestNewErrorsIgnorePositionAndCountRepeats: an error that moved is not
// new; a second copy of an old error is; warnings are left out; an error
// without severity counts.
func TestNewErrorsIgnorePositionAndCountRepeats(t *testing.T) {
	e, w := protocol.DiagnosticSeverityError, protocol.DiagnosticSeverityWarning
	before := []protocol.Diagnostic{diag(3, e, "undefined: x"), diag(9, w, "unused")}
	after := []protocol.Diagnostic{diag(5, e, "undefined: x"), diag(6, e, "undefined: x"), diag(7, w, "new warning"), diag(8, 0, "no severity")}
	got := newErrors(before, after)
	if len(got) != 2 || got[0].Range.Start.Line != 6 || got[1].Message != "no severity" {
		t.Fatalf("new errors: %+v", got)
	}
	out := formatNew("gopls", "a.go", got, 10, true)
	if out != "gopls reports 2 new errors in a.go:\n  a.go:7:1: undefined: x\n  a.go:9:1: no severity" {
		t.Fatalf("%q", out)
	}
	if out := formatNew("gopls", "a.go", got, 10, false); !strings.Contains(out, "gopls reports 2 errors in a.go (it had not answered for the file before this call, so some may be older):") {
		t.Fatalf("%q", out)
	}
	if formatNew("gopls", "a.go", nil, 10, true) != "" {
		t.Fatal("no new errors must add nothing")
	}
}
