package acp_test

import (
	"net"
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"
	dshacp "github.com/dsh-go/dsh/acp"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// closedURL is an HTTP address nothing listens on.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/mcp"
}

// A broken MCP server of the editor's does not cost the session: it opens
// with the servers that work, and the editor is told which server did not
// start and why, in the session's updates and in the answer's _meta.
func TestABrokenEditorMCPServerDoesNotFailTheSession(t *testing.T) {
	url, calls := shoutServer(t)
	e := newEnv(t, envOpts{mcp: true, mode: "full-access", replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "web__shout", Arguments: `{"text":"quiet"}`}}}, {Text: "done"},
	}})
	if _, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	r, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: e.dir, McpServers: []acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "Missing Tool", Command: "/nonexistent/mcp-server", Args: []string{}, Env: []acp.EnvVariable{}}},
		{Http: &acp.McpServerHttpInline{Type: "http", Name: "web", Url: url, Headers: []acp.HttpHeader{}}},
		{Http: &acp.McpServerHttpInline{Type: "http", Name: "Gone", Url: closedURL(t), Headers: []acp.HttpHeader{}}},
	}})
	if err != nil {
		t.Fatalf("one broken server failed the session: %v", err)
	}
	down, _ := r.Meta[dshacp.MetaMCPUnavailable].([]any)
	if len(down) != 2 {
		t.Fatalf("_meta: %v", r.Meta)
	}
	for i, name := range []string{"Missing Tool", "Gone"} {
		if d, _ := down[i].(map[string]any); d["name"] != name || d["error"] == "" {
			t.Fatalf("_meta[%d]: %v", i, down[i])
		}
	}
	said := e.c.waitFor(t, "the report", func(u acp.SessionUpdate) bool {
		return u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil && strings.Contains(u.AgentMessageChunk.Content.Text.Text, "Gone")
	}).AgentMessageChunk.Content.Text.Text
	if !strings.Contains(said, `"Missing Tool" did not start`) || !strings.Contains(said, "/nonexistent/mcp-server") {
		t.Fatalf("the editor was told %q", said)
	}
	// The server that works is there.
	if p, err := e.prompt(r.SessionId, "shout"); err != nil || p.StopReason != acp.StopReasonEndTurn {
		t.Fatal(p, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("the working server got %d calls", calls.Load())
	}
}

// session/load with a broken server resumes the session all the same: the
// failed first attempt leaves the stored session free for the second.
func TestLoadWithABrokenEditorMCPServer(t *testing.T) {
	e := newEnv(t, envOpts{mcp: true})
	id := e.newSession()
	if _, err := e.prompt(id, "remember this"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.CloseSession(e.ctx(), acp.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	r, err := e.conn.LoadSession(e.ctx(), acp.LoadSessionRequest{SessionId: id, Cwd: e.dir, McpServers: []acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "broken", Command: "/nonexistent/mcp-server", Args: []string{}, Env: []acp.EnvVariable{}}},
	}})
	if err != nil {
		t.Fatalf("a broken server failed the load: %v", err)
	}
	if down, _ := r.Meta[dshacp.MetaMCPUnavailable].([]any); len(down) != 1 {
		t.Fatalf("_meta: %v", r.Meta)
	}
	if p, err := e.prompt(id, "and now?"); err != nil || p.StopReason != acp.StopReasonEndTurn {
		t.Fatal(p, err)
	}
}

// An SSE server, a transport dsh does not speak (initialize offers no
// mcpCapabilities.sse), used to be dropped with a line on dsh's stderr
// only: the editor believed the session had its tools. It is reported as
// a server the session opened without, in the updates and in _meta.
func TestAnSSEServerIsReportedToTheEditor(t *testing.T) {
	e := newEnv(t, envOpts{mcp: true})
	init, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	if init.AgentCapabilities.McpCapabilities.Sse {
		t.Fatal("initialize offers SSE")
	}
	r, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: e.dir, McpServers: []acp.McpServer{
		{Sse: &acp.McpServerSseInline{Type: "sse", Name: "Legacy", Url: closedURL(t), Headers: []acp.HttpHeader{}}},
	}})
	if err != nil {
		t.Fatalf("an SSE server failed the session: %v", err)
	}
	down, _ := r.Meta[dshacp.MetaMCPUnavailable].([]any)
	if d, _ := first(down).(map[string]any); len(down) != 1 || d["name"] != "Legacy" || !strings.Contains(d["error"].(string), "not SSE") {
		t.Fatalf("_meta: %v", r.Meta)
	}
	e.c.waitFor(t, "the report", func(u acp.SessionUpdate) bool {
		return u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil && strings.Contains(u.AgentMessageChunk.Content.Text.Text, `"Legacy"`)
	})
}

func first(l []any) any {
	if len(l) == 0 {
		return nil
	}
	return l[0]
}

// Additional workspace roots, which initialize does not offer, used to be
// dropped without a word: an editor that sent them regardless believed the
// agent could reach them. The session opens, confined to its cwd, and the
// editor is told.
func TestAdditionalDirectoriesAreReportedAsUnused(t *testing.T) {
	e := newEnv(t, envOpts{})
	init, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	if init.AgentCapabilities.SessionCapabilities.AdditionalDirectories != nil {
		t.Fatal("initialize offers additionalDirectories")
	}
	other := t.TempDir()
	if _, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: e.dir, McpServers: []acp.McpServer{}, AdditionalDirectories: []string{other}}); err != nil {
		t.Fatal(err)
	}
	e.c.waitFor(t, "the report", func(u acp.SessionUpdate) bool {
		return u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil &&
			strings.Contains(u.AgentMessageChunk.Content.Text.Text, "the additional directories "+other+" are not part of it")
	})
}
