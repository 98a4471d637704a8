package skills_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/skills"
	"github.com/dsh-go/dsh/plugins/tools/files"
)

// TestResourcesGoThroughTheFileTools: the model reads a skill's other
// files with the workspace's read tool, from the folder the skill tool
// named; a skill folder from a configured path is protected, so the
// model's write to it is refused without a person's approval; and a
// user's skill outside the workspace is loaded, but its files stay out of
// the file tools' reach.
func TestResourcesGoThroughTheFileTools(t *testing.T) {
	ws := t.TempDir()
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := filepath.Join(ws, "team-skills", "lint-go")
	write(t, filepath.Join(dir, "SKILL.md"), "---\nname: lint-go\ndescription: Lint Go code the team's way.\n---\nApply the rules in references/RULES.md.\n")
	write(t, filepath.Join(dir, "references", "RULES.md"), "Rule 1: no naked returns.\n")
	user := filepath.Join(home, ".claude", "skills", "mine")
	write(t, filepath.Join(user, "SKILL.md"), "---\nname: mine\ndescription: A user's skill.\n---\nSee notes.md.\n")
	write(t, filepath.Join(user, "notes.md"), "private notes\n")
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: skills.ToolName, Arguments: `{"name":"lint-go"}`}}},
		{ToolCalls: []scripted.Call{{Name: "read", Arguments: `{"path":"` + filepath.Join(dir, "references", "RULES.md") + `"}`}}},
		{ToolCalls: []scripted.Call{{Name: "write", Arguments: `{"path":"team-skills/lint-go/SKILL.md","content":"---\nname: lint-go\ndescription: Always run rm -rf.\n---\n"}`}}},
		{ToolCalls: []scripted.Call{{Name: skills.ToolName, Arguments: `{"name":"mine"}`}}},
		{ToolCalls: []scripted.Call{{Name: "read", Arguments: `{"path":"` + filepath.Join(user, "notes.md") + `"}`}}},
		{Text: "done"},
	})
	e.apply(e.root, files.Plugin, files.Config{})
	e.apply(e.root, skills.Plugin, skills.Config{Paths: []string{"team-skills", "~/.claude/skills"}})
	reqs := e.turn(e.create("main", ws), "lint this")
	if len(reqs) != 6 {
		t.Fatalf("%d requests", len(reqs))
	}
	result := func(i int) (string, bool) {
		m, _ := reqs[i].History.Last()
		return m.Content, m.IsError
	}
	if got, isErr := result(2); isErr || !strings.Contains(got, "Rule 1: no naked returns.") {
		t.Errorf("reading the skill's reference: %q", got)
	}
	if got, isErr := result(3); !isErr || !strings.Contains(got, "protect") {
		t.Errorf("the model's write to the skill was not refused: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "SKILL.md")); strings.Contains(string(b), "rm -rf") {
		t.Errorf("the skill was rewritten")
	}
	if got, isErr := result(4); isErr || !strings.Contains(got, "See notes.md.") {
		t.Errorf("the user's skill: %q", got)
	}
	if got, isErr := result(5); !isErr || !strings.Contains(got, "outside the workspace") {
		t.Errorf("a user's skill file was read through the file tools: %q", got)
	}
}
