package serve_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPromptCommandsOverTheAPI: the web page and the HTTP API get prompt
// commands with no code of their own: a message "/review-pr 456 high alice"
// is expanded by the agent's admission stage, stored with what was typed,
// and answered; an unknown /name is refused (422) with the list.
func TestPromptCommandsOverTheAPI(t *testing.T) {
	dir := t.TempDir()
	// The positional-arguments example of Claude Code's slash command page.
	os.WriteFile(filepath.Join(dir, "review-pr.md"), []byte("---\nargument-hint: [pr-number] [priority] [assignee]\ndescription: Review pull request\n---\n\nReview PR #$1 with priority $2 and assign to $3.\nFocus on security, performance, and code style.\n"), 0o644)
	e := newEnv(t, envOpts{extra: "  - use: prompt.commands\n    config: {paths: [" + dir + "]}\n"})
	id := e.open(nil)
	e.send(id, "c1", "/review-pr 456 high alice")
	evs := e.waitEvents(id, "turn end", turnsEnded(1))
	if got := answer(evs); !strings.Contains(got, "Review PR #456 with priority high and assign to alice.") {
		t.Fatalf("answer %q", got)
	}
	var stored string
	for _, ev := range evs {
		if ev.Type == "user/message" && ev.Message != nil {
			stored = ev.Message.Content
		}
	}
	if !strings.HasPrefix(stored, "<command-name>/review-pr</command-name>\n<command-args>456 high alice</command-args>\n\nReview PR #456") {
		t.Fatalf("stored %q in %+v", stored, evs)
	}
	// The session is titled by the line typed, not by the tags.
	var list struct{ Sessions []sessionOut }
	e.call("GET", "/v1/sessions", nil).json(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].Title != "/review-pr 456 high alice" {
		t.Fatalf("list %+v", list)
	}
	r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "c2", "content": "/deploy"})
	var refused errorOut
	r.json(t, &refused)
	if r.status != http.StatusUnprocessableEntity || refused.Reason != "commands/unknown" || !strings.Contains(string(r.body), "/review-pr") {
		t.Fatalf("unknown command: %d %s", r.status, r.body)
	}
}
