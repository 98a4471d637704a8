package acp_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"
)

// TestPromptCommandsReachTheEditor: with prompt.commands mounted, the
// session's available_commands_update lists the workspace's command files
// beside the server's own (/steer, /rewind, /redo, /goal), with their description and argument hint, and a prompt
// "/name args" from the editor reaches the model expanded; an unknown one
// is refused with the list.
func TestPromptCommandsReachTheEditor(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	e := newEnv(t, envOpts{extra: "  - use: prompt.commands\n"})
	dir := filepath.Join(e.dir, ".claude", "commands")
	os.MkdirAll(dir, 0o755)
	// The positional-arguments example of Claude Code's slash command page.
	os.WriteFile(filepath.Join(dir, "review-pr.md"), []byte("---\nargument-hint: [pr-number] [priority] [assignee]\ndescription: Review pull request\n---\n\nReview PR #$1 with priority $2 and assign to $3.\nFocus on security, performance, and code style.\n"), 0o644)
	id := e.newSession()
	u := e.c.waitFor(t, "commands", func(u acp.SessionUpdate) bool {
		return u.AvailableCommandsUpdate != nil && len(u.AvailableCommandsUpdate.AvailableCommands) == 5
	})
	cs := u.AvailableCommandsUpdate.AvailableCommands
	if cs[0].Name != "steer" || cs[1].Name != "rewind" || cs[2].Name != "redo" || cs[3].Name != "goal" ||
		cs[4].Name != "review-pr" || cs[4].Description != "Review pull request" ||
		cs[4].Input == nil || cs[4].Input.Unstructured == nil || cs[4].Input.Unstructured.Hint != "[pr-number] [priority] [assignee]" {
		t.Fatalf("%+v", cs)
	}
	// The scripted model echoes what it received.
	if _, err := e.prompt(id, "/review-pr 456 high alice"); err != nil {
		t.Fatal(err)
	}
	if got := agentText(e.c.all()); !strings.Contains(got, "Review PR #456 with priority high and assign to alice.") || !strings.Contains(got, "<command-args>456 high alice</command-args>") {
		t.Fatalf("the model received %q", got)
	}
	if _, err := e.prompt(id, "/deploy"); err == nil || !strings.Contains(err.Error()+errData(err), "/review-pr") {
		t.Fatalf("unknown command: %v %s", err, errData(err))
	}
}

func errData(err error) string {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re.Message + " " + fmt.Sprint(re.Data)
	}
	return ""
}
