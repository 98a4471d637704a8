package lsp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/lsp"
)

// TestConfigErrorsSayWhatAndHow: each bad field is named with what to
// write instead; the defaults are gopls for Go.
func TestConfigErrorsSayWhatAndHow(t *testing.T) {
	def := lsp.Config{}.Defaults()
	if len(def.Servers) != 1 || def.Servers[0].Command != "gopls" || def.Servers[0].Files[0] != "*.go" || def.DiagnosticsWait != 3*time.Second {
		t.Fatalf("defaults: %+v", def)
	}
	if err := def.Validate(); err != nil {
		t.Fatalf("the defaults must be valid: %v", err)
	}
	cases := []struct {
		cfg  lsp.Config
		want string
	}{
		{lsp.Config{Servers: []lsp.Server{{Files: []string{"*.go"}}}}, "servers[0] has no command"},
		{lsp.Config{Servers: []lsp.Server{{Command: "gopls"}}}, `servers[0] has no files; give globs on file names, such as ["*.go"]`},
		{lsp.Config{Servers: []lsp.Server{{Command: "gopls", Files: []string{"src/*.go"}}}}, `files glob "src/*.go" is not a glob on a base name`},
		{lsp.Config{Servers: []lsp.Server{{Command: "gopls", Files: []string{"[.go"}}}}, `files glob "[.go"`},
		{lsp.Config{Servers: []lsp.Server{{Command: "gopls", Files: []string{"*.go"}}, {Command: "/opt/gopls", Files: []string{"*.mod"}}}}, `servers[1]: the name "gopls" is taken`},
		{lsp.Config{DiagnosticsWait: -time.Second}, "diagnostics_wait is -1s; set a positive duration"},
		{lsp.Config{MaxDiagnostics: -1}, "max_diagnostics and max_results must be positive"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if err == nil || errs.CodeOf(err) != errs.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %s containing %q", c.cfg, err, errs.InvalidArgument, c.want)
		}
	}
}
