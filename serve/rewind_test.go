package serve_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// TestRewindThroughTheAPI: a turn's sandboxed bash creates, changes and
// deletes files; POST .../rewind restores them, redo puts the change
// back, a file edited since is refused with 409 naming it, and force
// rewinds code and conversation both.
func TestRewindThroughTheAPI(t *testing.T) {
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "ignored"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, c := range map[string]string{"keep.txt": "v1\n", "old.txt": "old\n", "ignored/cache": "c1"} {
		if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	args, _ := json.Marshal(map[string]string{"command": "echo v2 > keep.txt && rm old.txt && echo hi > new.txt && chmod 0700 ignored/cache"})
	e := newEnv(t, envOpts{
		replies: []scripted.Reply{{Text: "changing", ToolCalls: []scripted.Call{{Name: "bash", Arguments: string(args)}}}, {Text: "done"}},
		extra:   "  - use: tools.bash\n  - use: tools.permission\n    config: {allow: [bash]}\n  - use: session.checkpoints\n",
		serve:   "  workspaces: [" + parent + "]\n",
	})
	id := e.open(map[string]any{"workspace": ws})
	e.send(id, "r1", "change things")
	e.waitEvents(id, "turn end", turnsEnded(1))
	state := func() string {
		var b strings.Builder
		for _, p := range []string{"keep.txt", "old.txt", "new.txt", "ignored/cache"} {
			fi, err := os.Stat(filepath.Join(ws, p))
			if err != nil {
				b.WriteString(p + " absent; ")
				continue
			}
			data, _ := os.ReadFile(filepath.Join(ws, p))
			b.WriteString(p + " " + fi.Mode().Perm().String() + " " + strings.TrimSpace(string(data)) + "; ")
		}
		return b.String()
	}
	const before = "keep.txt -rw-r----- v1; old.txt -rw-r----- old; new.txt absent; ignored/cache -rw-r----- c1; "
	const after = "keep.txt -rw-r----- v2; old.txt absent; new.txt -rw-r--r-- hi; ignored/cache -rwx------ c1; "
	if got := state(); got != after {
		t.Fatalf("after the turn: %s", got)
	}
	url := "/v1/sessions/" + id + "/rewind"
	if r := e.call("POST", url, map[string]any{"to": "1", "code": true}); r.status != http.StatusOK || !strings.Contains(string(r.body), `"type":"rewind"`) {
		t.Fatalf("rewind: %d %s", r.status, r.body)
	}
	if got := state(); got != before {
		t.Fatalf("after the rewind: %s", got)
	}
	if r := e.call("POST", url, map[string]any{"redo": true}); r.status != http.StatusOK {
		t.Fatalf("redo: %d %s", r.status, r.body)
	}
	if got := state(); got != after {
		t.Fatalf("after the redo: %s", got)
	}
	if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.call("POST", url, map[string]any{"to": "1"})
	if r.status != http.StatusConflict || !strings.Contains(string(r.body), "REWIND_WORKSPACE_CHANGED") || !strings.Contains(string(r.body), "keep.txt: changed since") {
		t.Fatalf("rewind over a changed file: %d %s", r.status, r.body)
	}
	if r := e.call("POST", url, map[string]any{"to": "1", "force": true}); r.status != http.StatusOK {
		t.Fatalf("forced rewind: %d %s", r.status, r.body)
	}
	if got := state(); got != before {
		t.Fatalf("after the forced rewind: %s", got)
	}
	if r := e.call("POST", url, map[string]any{"to": "x"}); r.status != http.StatusBadRequest {
		t.Fatalf("a bad point: %d %s", r.status, r.body)
	}
	if r := e.call("POST", url, map[string]any{"to": "7"}); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "REWIND_BAD_POINT") {
		t.Fatalf("a turn that never ran: %d %s", r.status, r.body)
	}
}
