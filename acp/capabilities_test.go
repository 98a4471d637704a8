package acp_test

import (
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"
)

// On a config with no session store (the shipped one), initialize offers
// neither session/load nor session/list nor session/resume, which could
// only fail there; session/new, prompt and close still work.
func TestInitializeOffersNoStoreWithoutOne(t *testing.T) {
	h, done := startHost(t, "plugins:\n  - use: llm.scripted\n    config: {replies: [{text: ok}]}\nagents:\n  - id: main\n    provider: scripted\n")
	defer done()
	conn, stop := serveOn(t, h, newClient())
	defer stop()
	e := &env{t: t}
	r, err := conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	c := r.AgentCapabilities
	if c.LoadSession || c.SessionCapabilities.List != nil || c.SessionCapabilities.Resume != nil || c.SessionCapabilities.Close == nil {
		t.Fatalf("without a store: %+v", c)
	}
	s, err := conn.NewSession(e.ctx(), newSessionReq(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := conn.Prompt(e.ctx(), acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}}); err != nil || p.StopReason != acp.StopReasonEndTurn {
		t.Fatal(p, err)
	}
	if _, err := conn.CloseSession(e.ctx(), acp.CloseSessionRequest{SessionId: s.SessionId}); err != nil {
		t.Fatal(err)
	}
	// A client that calls them anyway learns they are not there, and why.
	if _, err := conn.ListSessions(e.ctx(), acp.ListSessionsRequest{}); rpcCode(err) != -32601 || !strings.Contains(err.Error(), "session.jsonl") {
		t.Fatalf("session/list without a store: %v", err)
	}
	if _, err := conn.LoadSession(e.ctx(), acp.LoadSessionRequest{SessionId: s.SessionId, Cwd: t.TempDir(), McpServers: []acp.McpServer{}}); rpcCode(err) != -32601 {
		t.Fatalf("session/load without a store: %v", err)
	}
}
