package bundle_test

import (
	"github.com/dsh-go/dsh/services/llm"
	"slices"
	"strings"
	"testing"
)

// reviewer is a subagent as Claude Code's subagent docs write one.
const reviewer = `---
name: code-reviewer
description: Expert code review specialist. Proactively reviews code for quality, security, and maintainability. Use immediately after writing or modifying code.
tools: Read, Grep, Glob, Bash
model: inherit
---

You are a senior code reviewer ensuring high standards of code quality and security.

When invoked:
1. Run git diff to see recent changes
2. Focus on modified files
3. Begin review immediately
`

// TestABundlesAgentRunsWithItsSystemPrompt: a bundle's agents/*.md is
// offered through a tools.agent entry; when the parent's model calls it,
// the child runs on the parent's provider (the agent names none) and its
// model request carries the file's body as its system prompt.
func TestABundlesAgentRunsWithItsSystemPrompt(t *testing.T) {
	yaml := `
plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "asking the reviewer"
          tool_calls:
            - name: review-kit_agent
              arguments: '{"agent": "code-reviewer", "description": "review", "prompt": "Review main.go"}'
        - text: "main.go looks fine"
        - text: "the reviewer says it looks fine"
  - bundle: ./review-kit
agents:
  - id: a
    provider: scripted
`
	h, reqs := startWith(t, t.TempDir(), yaml, map[string]string{
		"review-kit/.claude-plugin/plugin.json": `{"name": "review-kit", "version": "1.0.0"}`,
		"review-kit/agents/code-reviewer.md":    reviewer,
	})
	if err := say(t, h, "please review my change"); err != nil {
		t.Fatal(err)
	}
	// The scripted provider walks its replies per agent: the child, on
	// the parent's provider, starts with the same tool call (refused:
	// children nest at most one deep), then answers.
	got := reqs()
	if len(got) != 4 {
		dump(t, got)
		t.Fatalf("%d model requests; want 4 (parent, child twice, parent)", len(got))
	}
	if !slices.ContainsFunc(got[0].Tools, func(tl llm.ToolSpec) bool {
		return tl.Name == "review-kit_agent" && strings.Contains(tl.Description, "code-reviewer: Expert code review specialist.")
	}) {
		t.Errorf("the parent's tools do not offer the bundle's agent: %+v", got[0].Tools)
	}
	child := got[1]
	if !strings.Contains(child.System, "You are a senior code reviewer ensuring high standards") || !strings.Contains(child.System, "3. Begin review immediately") {
		t.Errorf("the child's request lacks the agent's system prompt:\n%s", child.System)
	}
	if strings.Contains(child.System, "---") || strings.Contains(child.System, "model: inherit") {
		t.Errorf("the child's system prompt carries the front matter:\n%s", child.System)
	}
	if child.Provider != "scripted" {
		t.Errorf("the child ran on provider %q; want the parent's, scripted", child.Provider)
	}
	if user, _ := child.History.Last(); user.Content != "Review main.go" {
		t.Errorf("the child's task: %q", user.Content)
	}
	if got[3].System != "" {
		t.Errorf("the parent's own request took the child's system prompt:\n%s", got[3].System)
	}
	result, _ := got[3].History.Last()
	if result.IsError || result.Content != "main.go looks fine" {
		t.Errorf("the parent got %+v; want the child's answer", result)
	}
}

func dump(t *testing.T, reqs []llm.Request) {
	for i, r := range reqs {
		last, _ := r.History.Last()
		t.Logf("%d: provider=%s system=%.200q last=%.300q err=%v", i, r.Provider, r.System, last.Content, last.IsError)
	}
}
