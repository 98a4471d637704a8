package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goplsPath finds gopls on PATH or where go install puts it; CI installs
// it (.ci/run).
func goplsPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("gopls"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "gopls")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("gopls is not installed: run go install golang.org/x/tools/gopls@v0.23.0")
	return ""
}

// TestARunWhoseWriteBreaksGoSeesGoplsError: through dsh run with the
// scripted model, a write of a Go file that does not compile comes back
// with gopls's error in the tool's result, which the JSON stream shows.
func TestARunWhoseWriteBreaksGoSeesGoplsError(t *testing.T) {
	ws := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module example.com/m\n\ngo 1.22\n",
		"main.go": "package main\n\nfunc main() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	replies := `        - text: "writing "
          tool_calls: [{name: write, arguments: '{"path": "broken.go", "content": "package main\n\nfunc broken() int { return missing }\n"}'}]
        - text: done
`
	extra := fmt.Sprintf("  - use: tools.files\n  - use: tools.lsp\n    config:\n      servers: [{command: %q, files: [\"*.go\"], root_markers: [go.mod]}]\n      diagnostics_wait: 20s\n", goplsPath(t))
	cfg := writeConfig(t, replies, extra)
	o := runDsh(t, "", "run", "--config", cfg, "--set", "agents.main.workspace="+ws, "--json", "-p", "write it")
	if o.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", o.code, o.stdout, o.stderr)
	}
	if !strings.Contains(o.stdout, "gopls reports 1 new error in broken.go:") || !strings.Contains(o.stdout, "broken.go:3:28: undefined: missing") {
		t.Fatalf("the write's result lacks gopls's error:\n%s", o.stdout)
	}
}
