package skills_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/skills"
)

// TestModelDisabledSkillsAreNotOffered: a Claude Code skill with
// disable-model-invocation: true is one only a person runs (as /name);
// the model is never told of it. dsh has no /name for skills, so it
// offers it nowhere, says so, and it still shadows a user's skill of its
// name, as the project's skill does in Claude Code.
func TestModelDisabledSkillsAreNotOffered(t *testing.T) {
	ws, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	hidden := filepath.Join(ws, ".claude", "skills", "deploy", "SKILL.md")
	write(t, hidden, "---\nname: deploy\ndescription: Deploy to production\ndisable-model-invocation: true\n---\n\nDeploy it.\n")
	write(t, filepath.Join(home, ".claude", "skills", "deploy", "SKILL.md"), "---\nname: deploy\ndescription: The user's deploy\n---\n\nDeploy mine.\n")
	write(t, filepath.Join(ws, ".claude", "skills", "lint", "SKILL.md"), "---\nname: lint\ndescription: Lint the code\n---\n\nLint.\n")
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: skills.ToolName, Arguments: `{"name":"deploy"}`}}},
		{Text: "done"},
	})
	e.apply(e.root, skills.Plugin, skills.Config{}.Defaults())
	reqs := e.turn(e.create("main", ws), "ship it")
	sys := reqs[0].System
	if strings.Contains(sys, "deploy") || !strings.Contains(sys, "<name>lint</name>") {
		t.Fatalf("system prompt:\n%s", sys)
	}
	res, _ := reqs[1].History.Last()
	if !res.IsError || strings.Contains(res.Content, "Deploy") {
		t.Fatalf("the model ran a model-disabled skill: %+v", res)
	}
	for _, want := range []string{"SKILL_MODEL_DISABLED", hidden + ":4: disable-model-invocation: true keeps the skill from the model"} {
		if !strings.Contains(e.logged(), want) {
			t.Errorf("the log lacks %q:\n%s", want, e.logged())
		}
	}
}

// TestKeysThatChangeASkillAreWarnings: model, context: fork, agent and
// hooks change what a Claude Code skill does; dsh applies none, so each
// is a warning naming the file and what dsh does instead, while keys
// that change nothing here stay a note.
func TestKeysThatChangeASkillAreWarnings(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	file := filepath.Join(ws, ".claude", "skills", "review", "SKILL.md")
	write(t, file, "---\nname: review\ndescription: Review the change\nmodel: opus\ncontext: fork\nagent: Explore\nargument-hint: [file]\n---\n\nReview.\n")
	e := newEnv(t, []scripted.Reply{{Text: "ok"}})
	e.apply(e.root, skills.Plugin, skills.Config{}.Defaults())
	reqs := e.turn(e.create("main", ws), "hi")
	if !strings.Contains(reqs[0].System, "<name>review</name>") {
		t.Fatalf("the skill is not offered:\n%s", reqs[0].System)
	}
	l := e.logged()
	for _, want := range []string{
		"[WARN]  prompt.skills: skills: " + file + ": front matter dsh does not apply: model: the turn keeps the agent's model; context: the skill runs in the agent's own turn, not in a forked subagent; agent: the skill runs in the agent's own turn, not in a subagent",
		"[INFO]  prompt.skills: skills: front matter fields dsh does not apply are ignored",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("the log lacks %q:\n%s", want, l)
		}
	}
}
