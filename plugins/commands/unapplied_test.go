package commands_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/commands"
	"github.com/dsh-go/dsh/plugins/skills"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

// TestWhatDshDoesNotDoIsLoggedAtInvocation: front matter keys dsh does
// not read (a skill-style context: fork, agent, hooks), an @file
// reference, $0 and ${CLAUDE_SESSION_ID} would reach the model unapplied
// without a word; each is logged naming the file, the key or line, and
// what dsh does instead. The command still runs.
func TestWhatDshDoesNotDoIsLoggedAtInvocation(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	file := filepath.Join(ws, ".claude", "commands", "explain.md")
	writeFile(t, file, `---
description: Explain a file
context: fork
agent: Explore
hooks:
  PreToolUse: []
---

Explain @src/main.go to $ARGUMENTS.
Start with $0, in session ${CLAUDE_SESSION_ID}.
Mail me@example.com with questions.
`)
	plain := filepath.Join(ws, ".claude", "commands", "plain.md")
	writeFile(t, plain, "---\ndescription: plain\n---\n\nSay hi to $1.\n")
	e := newEnv(t)
	e.apply(e.root, commands.Plugin, commands.Config{}.Defaults())
	a := e.create("main", ws)
	got, err := e.prompt(a, "/explain a newcomer", agentcontroller.SourceUser)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Content, "Explain @src/main.go to a newcomer.") {
		t.Fatalf("the model received %q", got.Content)
	}
	log := e.logged()
	for _, want := range []string{
		file + ": front matter context (line 3), agent (line 4), hooks (line 5): dsh does not read these keys",
		file + ":9: @src/main.go is left as written, not replaced by the file's contents",
		file + ":10: $0 is left as written",
		file + ":10: ${CLAUDE_SESSION_ID} is left as written",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "@example.com") {
		t.Errorf("an e-mail address was taken for a file reference:\n%s", log)
	}
	if _, err := e.prompt(a, "/plain you", agentcontroller.SourceUser); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(e.logged(), plain) {
		t.Errorf("a command dsh runs as Claude Code does was warned about:\n%s", e.logged())
	}
}

// TestASkillTypedAsACommandSaysItIsASkill: Claude Code runs a skill as
// /name; dsh offers skills to the model only. A "/name" naming one of the
// agent's skills used to be refused as an unknown command, leaving the
// person to think the skill was missing; the refusal now says it is a
// skill and how to use it.
func TestASkillTypedAsACommandSaysItIsASkill(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	writeFile(t, filepath.Join(ws, ".claude", "skills", "pdf", "SKILL.md"), "---\nname: pdf\ndescription: Work with PDF files\n---\n\nUse pdftotext.\n")
	writeFile(t, filepath.Join(ws, ".claude", "commands", "review.md"), "Review the change.\n")
	e := newEnv(t)
	e.apply(e.root, skills.Plugin, skills.Config{}.Defaults())
	e.apply(e.root, commands.Plugin, commands.Config{}.Defaults())
	a := e.create("main", ws)
	_, err := e.prompt(a, "/pdf report.pdf", agentcontroller.SourceUser)
	if err == nil || !strings.Contains(err.Error(), "/pdf is a skill, not a command") {
		t.Fatalf("err = %v", err)
	}
	if _, err := e.prompt(a, "/deploy", agentcontroller.SourceUser); err == nil || !strings.Contains(err.Error(), "/deploy is not a command; the commands are /review") {
		t.Fatalf("an unknown name: %v", err)
	}
}
