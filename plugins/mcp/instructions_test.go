package mcp

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/systemprompt"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// instructed is a real SDK server that gives instructions at the
// handshake, with one tool.
func instructed(guide string) *mcpsdk.Server {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "docs", Version: "1"}, &mcpsdk.ServerOptions{Instructions: guide})
	srv.AddTool(&mcpsdk.Tool{Name: "search", InputSchema: objectSchema}, func(stdctx.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		return text("found"), nil
	})
	return srv
}

// TestServerInstructionsReachTheSystemPrompt: Claude Code puts the
// instructions an MCP server gives in its initialize answer into the
// system prompt. dsh used to drop them without a word, so the model used
// the server's tools without the server's own guidance.
func TestServerInstructionsReachTheSystemPrompt(t *testing.T) {
	const guide = "Call search before answering any question about the docs; quote the page it returns."
	root, _, _, err := mountLogged(t, serveOver(t, instructed(guide)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := systemprompt.EventAssemble.Dispatch(stdctx.Background(), root, systemprompt.Assembly{Text: "You are dsh."})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "You are dsh.\n\n") || !strings.Contains(got, guide) || !strings.Contains(got, `MCP server "docs"`) || !strings.Contains(got, "docs__<tool>") {
		t.Fatalf("the system prompt does not carry the server's instructions under its name:\n%s", got)
	}
}

// TestNoInstructionsAddNothing: a server that gives none leaves the
// prompt as it was, byte for byte (the provider's prompt cache).
func TestNoInstructionsAddNothing(t *testing.T) {
	root, _, _, err := mountLogged(t, serveOver(t, instructed("  ")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := systemprompt.EventAssemble.Dispatch(stdctx.Background(), root, systemprompt.Assembly{Text: "You are dsh."})
	if err != nil || got != "You are dsh." {
		t.Fatalf("prompt %q, %v", got, err)
	}
}

// TestLongInstructionsAreCutAndSaid: a server's text is bounded in
// every request; cutting it is said in the log, not done silently.
func TestLongInstructionsAreCutAndSaid(t *testing.T) {
	long := strings.Repeat("é", maxInstructions) // two bytes each: cut mid-rune
	root, _, logs, err := mountLogged(t, serveOver(t, instructed(long)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := systemprompt.EventAssemble.Dispatch(stdctx.Background(), root, systemprompt.Assembly{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > maxInstructions+200 || !strings.HasSuffix(got, "[... cut by dsh]") || !strings.Contains(got, "éé") {
		t.Fatalf("len %d, ends %q", len(got), got[max(0, len(got)-40):])
	}
	if !strings.Contains(logs.String(), "the first 8192 go into the system prompt") {
		t.Fatalf("the cut is not logged:\n%s", logs.String())
	}
}
