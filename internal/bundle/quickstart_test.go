package bundle_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/hosttest"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

// startWith loads yaml (with the files of the bundles under dir), starts
// a host and records every model request its agents make.
func startWith(t *testing.T, dir, yaml string, files map[string]string) (*host.Host, func() []llm.Request) {
	t.Helper()
	files["config.yaml"] = yaml
	for path, content := range files {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(config.LoadOptions{Path: filepath.Join(dir, "config.yaml"), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	var mu sync.Mutex
	var reqs []llm.Request
	agentloop.EventRequest.On(h.Root(), func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		mu.Lock()
		reqs = append(reqs, ev.Request)
		mu.Unlock()
		return next.Call(ctx, ev)
	})
	return h, func() []llm.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]llm.Request(nil), reqs...)
	}
}

// say delivers text to agent a as a person's prompt and waits for the turn.
func say(t *testing.T, h *host.Host, text string) error {
	t.Helper()
	ctl, err := agentcontroller.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := h.Agent("a")
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	if _, err := ctl.Deliver(ctx, a, agentcontroller.Request{Mode: agentcontroller.Followup, Source: agentcontroller.Source{Kind: agentcontroller.SourceUser}, Content: text}); err != nil {
		return err
	}
	return a.WhenIdle(ctx)
}

// quickstart is Claude Code's plugin quickstart bundle, as its docs write
// it: a manifest and one command.
var quickstart = map[string]string{
	"my-first-plugin/.claude-plugin/plugin.json": `{
  "name": "my-first-plugin",
  "description": "A greeting plugin to learn the basics",
  "version": "1.0.0",
  "author": {
    "name": "Your Name"
  }
}
`,
	"my-first-plugin/commands/hello.md": `---
description: Greet the user with a friendly message
---

# Hello Command

Greet the user warmly and ask how you can help them today.
`,
}

// TestTheQuickstartCommandAnswersToItsNamespacedName: the quickstart's
// "/my-first-plugin:hello" expands the bundle's command file, and so does
// the bare "/hello" while no other command has that name.
func TestTheQuickstartCommandAnswersToItsNamespacedName(t *testing.T) {
	yaml := `
plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "hello!"
        - text: "hello again!"
  - bundle: ./my-first-plugin
agents:
  - id: a
    provider: scripted
`
	files := map[string]string{}
	for k, v := range quickstart {
		files[k] = v
	}
	h, reqs := startWith(t, t.TempDir(), yaml, files)
	for i, text := range []string{"/my-first-plugin:hello", "/hello"} {
		if err := say(t, h, text); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		got := reqs()
		if len(got) != i+1 {
			t.Fatalf("%s: %d model requests; want %d", text, len(got), i+1)
		}
		user, _ := got[i].History.Last()
		if !strings.Contains(user.Content, "Greet the user warmly and ask how you can help them today.") {
			t.Errorf("%s was not expanded from the bundle's command file: %q", text, user.Content)
		}
	}
}
