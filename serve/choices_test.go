package serve_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A client opens sessions only on the workspaces and with the presets the
// operator allows: by default the agent's own workspace and nothing more.
// Before, {"workspace": "/"} ran the agent on the whole machine.
func TestClientChoosesOnlyWhatTheOperatorAllows(t *testing.T) {
	own, err := os.Getwd() // the agents' workspace: the working directory
	if err != nil {
		t.Fatal(err)
	}
	refused := func(e *env, body any, code string) {
		t.Helper()
		r := e.call("POST", "/v1/sessions", body)
		if r.status != http.StatusForbidden {
			t.Fatalf("%v: status %d, want 403: %s", body, r.status, r.body)
		}
		if a := r.err(t); a.Code != code {
			t.Fatalf("%v: code %q, want %q: %s", body, a.Code, code, a.Message)
		}
	}

	e := newEnv(t, envOpts{})
	refused(e, map[string]any{"workspace": "/"}, "SERVE_WORKSPACE_REFUSED")
	refused(e, map[string]any{"workspace": t.TempDir()}, "SERVE_WORKSPACE_REFUSED")
	refused(e, map[string]any{"presets": []string{"full-access"}}, "SERVE_PRESET_REFUSED")
	e.open(map[string]any{"workspace": own})

	allowed := t.TempDir()
	sub := filepath.Join(allowed, "repo")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(allowed, "root")); err != nil {
		t.Fatal(err)
	}
	e = newEnv(t, envOpts{serve: "  workspaces: [" + allowed + "]\n  client_presets: [read-only]\n"})
	e.open(map[string]any{"workspace": sub, "presets": []string{"read-only"}})
	e.open(map[string]any{"workspace": allowed})
	refused(e, map[string]any{"workspace": filepath.Join(allowed, "root")}, "SERVE_WORKSPACE_REFUSED")
	refused(e, map[string]any{"workspace": filepath.Join(allowed, "..")}, "SERVE_WORKSPACE_REFUSED")
	refused(e, map[string]any{"workspace": allowed + "-other"}, "SERVE_WORKSPACE_REFUSED")
	refused(e, map[string]any{"presets": []string{"full-access"}}, "SERVE_PRESET_REFUSED")
	r := e.call("POST", "/v1/sessions", map[string]any{"workspace": "/etc"})
	if a := r.err(t); !strings.Contains(a.Message, "serve.workspaces") {
		t.Fatalf("the refusal must say how to allow it: %s", a.Message)
	}
}
