package main

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/sdk/sdktest"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
)

// TestEngineMountedInDsh mounts the built engine with exec: in a dsh host,
// as a config would, and prompts through the session service: a webhook's
// prompt is refused by the engine's rule, and bob's write — asked about by
// the engine, in a turn nobody answers for — is refused with the engine's
// reason, while alice's runs. The provenance crossed the host's bridge to
// the binary and the decisions came back through it.
func TestEngineMountedInDsh(t *testing.T) {
	bin := sdktest.Build(t, ".")
	ws := t.TempDir()
	cfg, err := config.Parse("config.yaml", []byte(fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: write, arguments: '{"path": "notes.md", "content": "hi"}'}]
        - text: done
  - use: tools.files
  - id: engine
    exec: %s
    config:
      rules:
        - {name: no-webhooks, stage: admission, effect: refuse, entry: [webhook], message: webhooks are off}
        - {name: owner-only-writes, stage: approval, effect: ask, tools: [write, edit], unless_principal: ["token:alice"]}
agents:
  - id: main
    provider: scripted
    workspace: %s
`, bin, ws)), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	ctx := stdctx.Background()
	open := func() string {
		in, err := h.Sessions().Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", KeepRunning: true}})
		if err != nil {
			t.Fatal(err)
		}
		return in.ID
	}

	_, err = h.Sessions().Prompt(ctx, open(), sessions.PromptRequest{RequestID: "w1", Content: "build failed",
		Source: sessions.Source{Kind: sessions.SourceWebhook, Entry: "webhook", Principal: sessions.Principal{Kind: "webhook", ID: "ci"}}})
	if r, ok := sessions.RejectionOf(err); !ok || r.Reason != "policy-engine/no-webhooks" || r.Message != "webhooks are off" {
		t.Fatalf("the webhook's prompt: %v", err)
	}

	result := func(who string) string {
		t.Helper()
		id := open()
		turn, err := h.Sessions().Prompt(ctx, id, sessions.PromptRequest{RequestID: who, Content: "write notes",
			Source: sessions.Source{Kind: sessions.SourceUser, Entry: "serve", Principal: sessions.Principal{Kind: "token", ID: who}}})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := stdctx.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if _, err := turn.Wait(wctx); err != nil {
			t.Fatal(err)
		}
		evs, err := h.Sessions().History(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == session.ToolResult {
				return ev.Message.Content
			}
		}
		t.Fatalf("%s's turn has no tool result", who)
		return ""
	}
	if got := result("bob"); !strings.Contains(got, "policy-engine/owner-only-writes") || !strings.Contains(got, "was not approved") {
		t.Fatalf("bob's write: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes.md")); err == nil {
		t.Fatal("bob's refused write ran")
	}
	if got := result("alice"); strings.Contains(got, "not approved") {
		t.Fatalf("alice's write: %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "notes.md")); err != nil || string(b) != "hi" {
		t.Fatalf("alice's write left %q (%v)", b, err)
	}
}
