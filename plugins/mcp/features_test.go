package mcp

import (
	stdctx "context"
	"strings"
	"sync"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/internal/syncbuf"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveOver is a config that connects to srv over the SDK's in-memory
// transport.
func serveOver(t testing.TB, srv *mcpsdk.Server) Config {
	c := Config{}.Defaults()
	c.Name = "docs"
	c.transport = func() (mcpsdk.Transport, error) {
		st, ct := mcpsdk.NewInMemoryTransports()
		ss, err := srv.Connect(stdctx.Background(), st, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { ss.Close() })
		return ct, nil
	}
	return c
}

// mountLogged is mount with the root's log kept.
func mountLogged(t testing.TB, cfg Config) (*dshctx.Context, *tools.Service, *syncbuf.Buffer, error) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	root := dshctx.New(dshctx.WithLogger(hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})))
	ctxtest.Cleanup(t, root)
	f, err := root.Plugin(tools.Plugin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	svc, _ := tools.Key.Get(root)
	f, err = root.Plugin(Plugin, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return root, svc, logs, f.Await(stdctx.Background())
}

// resourceServer is a real SDK server with resources and prompts and,
// when withTool, one tool.
func resourceServer(withTool bool) *mcpsdk.Server {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "docs", Version: "1"}, nil)
	srv.AddResource(&mcpsdk.Resource{URI: "docs://readme", Name: "readme", MIMEType: "text/plain"},
		func(_ stdctx.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
			return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{{URI: req.Params.URI, Text: "read me"}}}, nil
		})
	srv.AddPrompt(&mcpsdk.Prompt{Name: "summarize"}, func(stdctx.Context, *mcpsdk.GetPromptRequest) (*mcpsdk.GetPromptResult, error) {
		return &mcpsdk.GetPromptResult{Messages: []*mcpsdk.PromptMessage{{Role: "user", Content: &mcpsdk.TextContent{Text: "summarize"}}}}, nil
	})
	if withTool {
		srv.AddTool(&mcpsdk.Tool{Name: "search", InputSchema: objectSchema}, func(stdctx.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return text("found"), nil
		})
	}
	return srv
}

// TestAServerWithoutToolsIsNotAskedForThem: the spec has a client use
// only what a server declared. A server that declares no tools (here one
// that answers tools/list "method not found", as a TypeScript SDK server
// without tools does) used to fail dsh's start; it now starts, adds
// nothing, and says so, naming the resources and prompts dsh does not
// use.
func TestAServerWithoutToolsIsNotAskedForThem(t *testing.T) {
	srv := resourceServer(false)
	var asked []string
	var mu sync.Mutex
	srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx stdctx.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			mu.Lock()
			asked = append(asked, method)
			mu.Unlock()
			if method == "tools/list" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"}
			}
			return next(ctx, method, req)
		}
	})
	root, svc, logs, err := mountLogged(t, serveOver(t, srv))
	if err != nil {
		t.Fatalf("a server without tools did not start: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range asked {
		if m == "tools/list" {
			t.Errorf("dsh asked a server that declared no tools for them: %v", asked)
		}
	}
	for _, tl := range svc.Specs(root) {
		if strings.HasPrefix(tl.Name, "docs__") {
			t.Errorf("a tool appeared: %s", tl.Name)
		}
	}
	for _, want := range []string{
		"the MCP server offers resources and prompts, which dsh does not use: only MCP tools reach the model",
		"the MCP server declares no tools, and dsh uses only an MCP server's tools: it adds nothing to the agent: mcp_server=docs",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestResourcesAndPromptsBesideToolsAreNamed: a server with tools,
// resources and prompts gives its tools; the resources and prompts, which
// Claude Code offers and dsh does not, are named in one warning.
func TestResourcesAndPromptsBesideToolsAreNamed(t *testing.T) {
	root, svc, logs, err := mountLogged(t, serveOver(t, resourceServer(true)))
	if err != nil {
		t.Fatal(err)
	}
	if svc.Lookup(root, "docs__search") == nil {
		t.Fatalf("the server's tool is not registered: %v", svc.Specs(root))
	}
	l := logs.String()
	if strings.Count(l, "which dsh does not use") != 1 || strings.Contains(l, "declares no tools") {
		t.Fatalf("log:\n%s", l)
	}
}
