package files

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// tree makes a workspace holding files (path -> content; a path ending in
// "/" is an empty folder) and returns its absolute path.
func tree(t testing.TB, files map[string]string) string {
	t.Helper()
	ws := t.TempDir()
	for p, content := range files {
		full := filepath.Join(ws, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// run calls the tool name of a config (defaults filled) in workspace ws.
func run(t *testing.T, cfg Config, name, ws string, args any) tools.Result {
	t.Helper()
	return runIn(t, stdctx.Background(), cfg, name, ws, args)
}

// runIn is run with the call's context ctx.
func runIn(t *testing.T, ctx stdctx.Context, cfg Config, name, ws string, args any) tools.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range cfg.withDefaults().build() {
		if tool.Name == name {
			r, err := tool.Execute(ctx, tools.Call{Name: name, Arguments: raw, Workspace: ws})
			if err != nil {
				t.Fatalf("%s returned a Go error (a failed turn) instead of a result: %v", name, err)
			}
			return r
		}
	}
	t.Fatalf("no tool %q", name)
	return tools.Result{}
}

// ok runs a call that must succeed and returns its content.
func ok(t *testing.T, cfg Config, name, ws string, args any) string {
	t.Helper()
	r := run(t, cfg, name, ws, args)
	if r.IsError {
		t.Fatalf("%s %v failed: %s", name, args, r.Content)
	}
	return r.Content
}

// refused runs a call that must fail with a message holding every want.
func refused(t *testing.T, cfg Config, name, ws string, args any, want ...string) string {
	t.Helper()
	r := run(t, cfg, name, ws, args)
	if !r.IsError {
		t.Fatalf("%s %v must fail, got: %s", name, args, r.Content)
	}
	for _, w := range want {
		if !strings.Contains(r.Content, w) {
			t.Fatalf("%s %v: the error %q does not say %q", name, args, r.Content, w)
		}
	}
	return r.Content
}

type m = map[string]any

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
