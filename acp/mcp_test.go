package acp_test

import (
	stdctx "context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// shoutServer is a real MCP server over streamable HTTP with one tool,
// shout, that upper-cases its text and counts its calls.
func shoutServer(t *testing.T) (url string, calls *atomic.Int32) {
	t.Helper()
	n := new(atomic.Int32)
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "shout", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "shout", Description: "upper-cases text", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ stdctx.Context, _ *mcpsdk.CallToolRequest, a in) (*mcpsdk.CallToolResult, any, error) {
			n.Add(1)
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: strings.ToUpper(a.Text)}}}, nil, nil
		})
	hs := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL, n
}

// An editor's MCP server is mounted in that session's agent: the model
// calls its tool under the session's name for it, the call reaches the
// server, and its result comes back in the tool call's update. Another
// session, opened without the server, does not have the tool.
func TestTheEditorsMCPServerGivesTheSessionItsTools(t *testing.T) {
	url, calls := shoutServer(t)
	e := newEnv(t, envOpts{mcp: true, replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "my-web__shout", Arguments: `{"text":"quiet"}`}}}, {Text: "done"},
		{ToolCalls: []scripted.Call{{Name: "my-web__shout", Arguments: `{"text":"again"}`}}}, {Text: "done"},
	}})
	if _, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	r, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: e.dir, McpServers: []acp.McpServer{
		{Http: &acp.McpServerHttpInline{Type: "http", Name: "My Web", Url: url, Headers: []acp.HttpHeader{}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// workspace-write (the default mode) asks before a tool that is not
	// one of dsh's file tools; the editor allows it once.
	e.c.answers <- acp.NewRequestPermissionOutcomeSelected("allow-once")
	if p, err := e.prompt(r.SessionId, "shout"); err != nil || p.StopReason != acp.StopReasonEndTurn {
		t.Fatal(p, err)
	}
	if p := <-e.c.asked; p.ToolCall.Title == nil || !strings.Contains(*p.ToolCall.Title, "my-web__shout") {
		t.Fatalf("asked about %+v", p.ToolCall)
	}
	if calls.Load() != 1 {
		t.Fatalf("the server got %d calls", calls.Load())
	}
	var result string
	for _, n := range e.c.all() {
		if u := n.Update.ToolCallUpdate; u != nil && u.Status != nil && *u.Status == acp.ToolCallStatusCompleted {
			for _, c := range u.Content {
				if c.Content != nil && c.Content.Content.Text != nil {
					result += c.Content.Content.Text.Text
				}
			}
		}
	}
	if !strings.Contains(result, "QUIET") {
		t.Fatalf("the server's result is not in the update: %s", dump(e.c.all()))
	}

	other, err := e.conn.NewSession(e.ctx(), newSessionReq(e.dir))
	if err != nil {
		t.Fatal(err)
	}
	e.c.answers <- acp.NewRequestPermissionOutcomeSelected("allow-once")
	if p, err := e.prompt(other.SessionId, "shout"); err != nil || p.StopReason != acp.StopReasonEndTurn {
		t.Fatal(p, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("a session without the server reached it: %d calls", calls.Load())
	}
}
