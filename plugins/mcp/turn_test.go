package mcp_test

import (
	"bytes"
	stdctx "context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/plugins/mcp"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// turnConfig mounts the test server in a preset only agent "a" has; its
// scripted model calls the server's echo tool once and then answers.
func turnConfig() string {
	return fmt.Sprintf(`
plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "asking the server"
          tool_calls:
            - name: gh__echo
              arguments: '{"text": "from the server"}'
        - text: "done"
presets:
  github:
    - id: github
      use: tools.mcp
      config:
        name: gh
        command: %q
        env: {DSH_MCP_TEST_SERVER: "1"}
agents:
  - id: a
    provider: scripted
    preset: github
  - id: b
    provider: scripted
`, os.Args[0])
}

// TestAFullTurnCallsAnMCPToolInAPreset: the YAML entry decodes into the
// plugin's config, the tools exist for the preset's agent only, and a
// whole turn of the agent loop calls one and hands its result to the
// model.
func TestAFullTurnCallsAnMCPToolInAPreset(t *testing.T) {
	cfg, err := config.Parse("config.yaml", []byte(turnConfig()), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	svc, err := tools.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := h.Agent("a")
	b, _ := h.Agent("b")
	if svc.Lookup(a.Context(), "gh__echo") == nil {
		t.Fatal("agent a lacks gh__echo")
	}
	if svc.Lookup(b.Context(), "gh__echo") != nil || svc.Lookup(h.Root(), "gh__echo") != nil {
		t.Fatal("the preset's tools leaked beyond its agent")
	}

	if err := a.Followup(llm.Message{Role: llm.RoleUser, Content: "go"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Second)
	defer cancel()
	if err := a.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var result string
	for _, e := range a.Session().Events(1) {
		if e.Type == session.ToolResult && e.Message != nil {
			result = e.Message.Content
		}
	}
	if result != "from the server" {
		t.Fatalf("the tool result in the session: %q", result)
	}
	if !strings.Contains(lastAssistant(a.Session()), "done") {
		t.Fatal("the turn did not finish")
	}
}

func lastAssistant(s *session.Session) string {
	text := ""
	for _, e := range s.Events(1) {
		if e.Type == session.AssistantMessage && e.Message != nil {
			text = e.Message.Content
		}
	}
	return text
}

// TestAnImageFromAnMCPToolReachesTheSessionByReference: through a whole
// turn, the image a stdio server's tool returns is kept in the host's
// attachments store and the tool/result message in the session log names
// it by reference, after the result's text.
func TestAnImageFromAnMCPToolReachesTheSessionByReference(t *testing.T) {
	yaml := fmt.Sprintf(`
plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "looking"
          tool_calls:
            - name: gh__image
              arguments: '{}'
        - text: "done"
  - use: tools.mcp
    config:
      name: gh
      command: %q
      env: {DSH_MCP_TEST_SERVER: "1"}
agents:
  - id: a
    provider: scripted
`, os.Args[0])
	cfg, err := config.Parse("config.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	a, _ := h.Agent("a")
	if err := a.Followup(llm.Message{Role: llm.RoleUser, Content: "go"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Second)
	defer cancel()
	if err := a.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var msg *llm.Message
	for _, e := range a.Session().Events(1) {
		if e.Type == session.ToolResult && e.Message != nil {
			msg = e.Message
		}
	}
	if msg == nil || msg.IsError {
		t.Fatalf("the tool result in the session: %+v", msg)
	}
	img := mcp.TestPNG()
	if len(msg.Parts) != 2 || msg.Parts[0].Type != llm.PartText || !strings.HasPrefix(msg.Parts[0].Text, "a dot:\n[image: image/png") {
		t.Fatalf("the result's parts: %+v", msg.Parts)
	}
	p := msg.Parts[1]
	if p.Type != llm.PartImage || p.MediaType != "image/png" || p.Size != int64(len(img)) || !strings.HasPrefix(p.Ref, "sha256:") || p.Data != nil {
		t.Fatalf("the image part in the log: %+v", p)
	}
	store, err := attachments.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(p.Ref)
	if err != nil || !bytes.Equal(got, img) {
		t.Fatalf("the store holds %d bytes for %s (%v), want the server's %d", len(got), p.Ref, err, len(img))
	}
	if !strings.Contains(lastAssistant(a.Session()), "done") {
		t.Fatal("the turn did not finish")
	}
}
