package acp_test

import (
	stdctx "context"
	"fmt"
	"io"
	"os"

	"github.com/coder/acp-go-sdk"
	dshacp "github.com/dsh-go/dsh/acp"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/hashicorp/go-hclog"
)

// Serve an editor on a pair of pipes (dsh acp uses stdin and stdout): the
// client here is the SDK's own client side.
func ExampleServe() {
	cfg, _ := config.Parse("example.yaml", []byte("plugins:\n  - use: llm.scripted\nagents:\n  - id: main\n    provider: scripted\n"), config.LoadOptions{Environ: []string{}})
	h, _ := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	defer h.Close(stdctx.Background())

	toAgent, fromClient := io.Pipe()
	toClient, fromAgent := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- dshacp.Serve(stdctx.Background(), toAgent, fromAgent, dshacp.Options{Sessions: h.Sessions(), Agent: "main"})
		fromAgent.Close()
	}()

	editor := newClient()
	conn := acp.NewClientSideConnection(editor, fromClient, toClient)
	ctx := stdctx.Background()
	init, _ := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	dir, _ := os.MkdirTemp("", "acp-example")
	defer os.RemoveAll(dir)
	s, _ := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
	r, _ := conn.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})

	fmt.Println("protocol", init.ProtocolVersion, "load", init.AgentCapabilities.LoadSession)
	fmt.Println(agentText(editor.all()), "/", r.StopReason)

	fromClient.Close() // the editor goes away: every session is closed
	fmt.Println("served:", <-served)
	<-conn.Done()
	// This config has no session store, so session/load is not offered.
	// Output:
	// protocol 1 load false
	// You said: hi / end_turn
	// served: <nil>
}
