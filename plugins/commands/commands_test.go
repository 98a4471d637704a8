package commands_test

import (
	stdctx "context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/commands"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
)

// TestDocumentedCommandsExpandUnchanged: the examples of Claude Code's
// slash command page, copied unchanged, expand as the page says, through a
// real delivery and turn; the model receives what the user typed and the
// expansion.
func TestDocumentedCommandsExpandUnchanged(t *testing.T) {
	ws, _ := docsFolders(t)
	e := newEnv(t)
	e.apply(e.root, commands.Plugin, commands.Config{}.Defaults())
	a := e.create("main", ws)
	cases := []struct{ typed, want string }{
		{"/review-pr 456 high alice", "<command-name>/review-pr</command-name>\n<command-args>456 high alice</command-args>\n\nReview PR #456 with priority high and assign to alice.\nFocus on security, performance, and code style."},
		{"/fix-issue 123 high-priority", "<command-name>/fix-issue</command-name>\n<command-args>123 high-priority</command-args>\n\nFix issue #123 high-priority following our coding standards"},
		{"/optimize", "<command-name>/optimize</command-name>\n\nAnalyze this code for performance issues and suggest optimizations:"},
		// The user's own command; no placeholder, so the arguments are
		// appended as Claude Code does.
		{"/security-review src/auth.go", "<command-name>/security-review</command-name>\n<command-args>src/auth.go</command-args>\n\nReview this code for security vulnerabilities:\n\nARGUMENTS: src/auth.go"},
		{"/commit fix the typo", "<command-name>/commit</command-name>\n<command-args>fix the typo</command-args>\n\nCreate a git commit with message: fix the typo"},
		// A subfolder does not change the name; the namespaced form
		// works too. Quotes keep one argument together.
		{`/component "Nav Bar" src/ui`, "<command-name>/component</command-name>\n<command-args>\"Nav Bar\" src/ui</command-args>\n\nCreate a React component named Nav Bar in src/ui."},
		{"/frontend:component Nav", "<command-name>/frontend:component</command-name>\n<command-args>Nav</command-args>\n\nCreate a React component named Nav in ."},
		// Not a command name: reaches the model as typed.
		{"/usr/bin/env is missing", "/usr/bin/env is missing"},
	}
	for _, c := range cases {
		got, err := e.prompt(a, c.typed, agentcontroller.SourceUser)
		if err != nil {
			t.Fatalf("%s: %v", c.typed, err)
		}
		if got.Content != c.want {
			t.Errorf("%s: the model received\n%q\nwant\n%q", c.typed, got.Content, c.want)
		}
	}
	// The session stores what the model received: the typed line and its
	// expansion.
	stored := a.Session().History().Messages()
	if !strings.Contains(stored[0].Content, "<command-args>456 high alice</command-args>") || !strings.Contains(stored[0].Content, "Review PR #456") {
		t.Errorf("stored: %q", stored[0].Content)
	}
	if l := e.logged(); !strings.Contains(l, "claude-3-5-haiku-20241022") || !strings.Contains(l, "allowed-tools are not applied") {
		t.Errorf("the ignored model and allowed-tools of /commit are not logged:\n%s", l)
	}
}

// TestUnknownCommandIsRefusedListingTheCommands: a /name no folder holds
// never reaches the model; the refusal lists what there is.
func TestUnknownCommandIsRefusedListingTheCommands(t *testing.T) {
	ws, _ := docsFolders(t)
	e := newEnv(t)
	e.apply(e.root, commands.Plugin, commands.Config{}.Defaults())
	a := e.create("main", ws)
	_, err := e.prompt(a, "/deploy now", agentcontroller.SourceUser)
	if !errs.HasCode(err, agentcontroller.RejectedCode) || !strings.Contains(err.Error(), commands.ReasonUnknown) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"/deploy is not a command", "/review-pr", "/security-review", "/component", "/optimize"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q: %v", want, err)
		}
	}
	if a.Session().History().Len() != 0 {
		t.Errorf("a refused command reached the session")
	}
}

// TestShellLinesAreRefusedWithTheirPlace: the page's bash execution
// example is refused, naming the file, the line and the fix, instead of
// reaching the model with its !`…` lines unrun.
func TestShellLinesAreRefusedWithTheirPlace(t *testing.T) {
	ws, _ := docsFolders(t)
	e := newEnv(t)
	e.apply(e.root, commands.Plugin, commands.Config{}.Defaults())
	_, err := e.prompt(e.create("main", ws), "/commit-context", agentcontroller.SourceUser)
	file := filepath.Join(ws, ".claude", "commands", "commit-context.md")
	if err == nil || !strings.Contains(err.Error(), commands.ReasonUnsupported) || !strings.Contains(err.Error(), "!`git status`, "+file+":8") {
		t.Fatalf("err = %v", err)
	}
}

// TestSubagentPromptsAreLeftAlone: text a model wrote for a subagent is not
// a person's command.
func TestSubagentPromptsAreLeftAlone(t *testing.T) {
	ws, _ := docsFolders(t)
	e := newEnv(t)
	e.apply(e.root, commands.Plugin, commands.Config{}.Defaults())
	got, err := e.prompt(e.create("main", ws), "/deploy now", agentcontroller.SourceSubagent)
	if err != nil || got.Content != "/deploy now" {
		t.Fatalf("%q, %v", got.Content, err)
	}
}

// TestTwoEntriesCombine: a second entry (a bundle's folder) adds its
// commands; the first entry does not refuse them, and List shows both.
func TestTwoEntriesCombine(t *testing.T) {
	ws, _ := docsFolders(t)
	bundle := t.TempDir()
	writeFile(t, filepath.Join(bundle, "deploy.md"), "---\ndescription: Deploy it\nargument-hint: [env]\n---\nDeploy to $1.\n")
	writeFile(t, filepath.Join(bundle, "optimize.md"), "bundle's optimize\n")
	e := newEnv(t)
	e.apply(e.root, commands.Plugin, commands.Config{}.Defaults())
	e.apply(e.root, commands.Plugin, commands.Config{Paths: []string{bundle}})
	a := e.create("main", ws)
	got, err := e.prompt(a, "/deploy staging", agentcontroller.SourceUser)
	if err != nil || !strings.HasSuffix(got.Content, "Deploy to staging.") {
		t.Fatalf("%q, %v", got.Content, err)
	}
	got, _ = e.prompt(a, "/optimize", agentcontroller.SourceUser)
	if !strings.Contains(got.Content, "Analyze this code") {
		t.Fatalf("the first entry's /optimize lost to the second's: %q", got.Content)
	}
	var names []string
	for _, c := range commands.List(t.Context(), a) {
		names = append(names, c.Name)
		if c.Name == "deploy" && (c.Description != "Deploy it" || c.ArgumentHint != "[env]") {
			t.Errorf("deploy: %+v", c)
		}
	}
	if got := strings.Join(names, " "); got != "commit commit-context fix-issue optimize review-pr component security-review deploy" {
		t.Errorf("List: %s", got)
	}
}

// TestInAPresetOnlyThatAgentExpands: mounted in one agent's scope, the
// other agent's /names pass as typed.
func TestInAPresetOnlyThatAgentExpands(t *testing.T) {
	ws, _ := docsFolders(t)
	e := newEnv(t)
	a := e.create("a", ws)
	b := e.create("b", ws)
	e.apply(a.Context(), commands.Plugin, commands.Config{}.Defaults())
	if got, _ := e.prompt(a, "/optimize", agentcontroller.SourceUser); !strings.Contains(got.Content, "Analyze this code") {
		t.Errorf("a: %q", got.Content)
	}
	if got, err := e.prompt(b, "/optimize", agentcontroller.SourceUser); err != nil || got.Content != "/optimize" {
		t.Errorf("b: %q %v", got.Content, err)
	}
	if len(commands.List(t.Context(), b)) != 0 {
		t.Errorf("b lists a's commands")
	}
}

// TestAMessageWithPartsExpandsItsFirstText: a prompt of several blocks (an
// editor's text and a resource) expands its first text block; the other
// blocks follow unchanged and Content stays the text of the parts.
func TestAMessageWithPartsExpandsItsFirstText(t *testing.T) {
	ws, _ := docsFolders(t)
	e := newEnv(t)
	e.apply(e.root, commands.Plugin, commands.Config{}.Defaults())
	a := e.create("main", ws)
	parts := []llm.Part{{Type: llm.PartText, Text: "/fix-issue 7"}, {Type: llm.PartText, Text: "\n[log](file:///tmp/log)"}}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.ctl.Deliver(ctx, a, agentcontroller.Request{Mode: agentcontroller.Followup, Source: agentcontroller.Source{Kind: agentcontroller.SourceUser},
		Prepare: func(stdctx.Context) (agentcontroller.Prepared, error) {
			return agentcontroller.Prepared{Content: llm.TextOf(parts), Parts: parts}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := a.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
	m := a.Session().History().At(0)
	want := "<command-name>/fix-issue</command-name>\n<command-args>7</command-args>\n\nFix issue #7 following our coding standards"
	if len(m.Parts) != 2 || m.Parts[0].Text != want || m.Parts[1].Text != parts[1].Text || m.Content != want+parts[1].Text || parts[0].Text != "/fix-issue 7" {
		t.Fatalf("stored %+v", m)
	}
}

// TestABrokenFileIsLoggedOnceWithItsLine: a command file whose front matter
// is broken is left out, logged with its file and line, once however often
// the folder is scanned; the other commands work.
func TestABrokenFileIsLoggedOnceWithItsLine(t *testing.T) {
	ws, _ := docsFolders(t)
	bad := filepath.Join(ws, ".claude", "commands", "bad.md")
	writeFile(t, bad, "---\ndescription: fine\nnot a field\n---\nbody\n")
	e := newEnv(t)
	e.apply(e.root, commands.Plugin, commands.Config{}.Defaults())
	a := e.create("main", ws)
	for range 2 {
		if got, err := e.prompt(a, "/optimize", agentcontroller.SourceUser); err != nil || !strings.Contains(got.Content, "Analyze this code") {
			t.Fatalf("%q %v", got.Content, err)
		}
	}
	if _, err := e.prompt(a, "/bad", agentcontroller.SourceUser); err == nil {
		t.Fatal("the broken command ran")
	}
	if l := e.logged(); strings.Count(l, "command file left out") != 1 || !strings.Contains(l, bad+":3: the front matter is not valid YAML") {
		t.Fatalf("log:\n%s", l)
	}
}
