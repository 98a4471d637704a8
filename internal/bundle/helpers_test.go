package bundle

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// ServerEnv, set, makes the test binary an MCP server on stdio: the server
// a bundle under test declares in its .mcp.json.
const ServerEnv = "DSH_BUNDLE_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(ServerEnv) != "" {
		if err := testServer().Run(stdctx.Background(), &mcpsdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m)
}

// testServer is a real MCP server built with the SDK. Its one tool, say,
// answers with $GREETING, the text, and the ${CLAUDE_PLUGIN_ROOT} it was
// given, and appends each text it is called with to the file $CALLS.
func testServer() *mcpsdk.Server {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "echo-kit", Version: "1"}, nil)
	schema := map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"}}
	srv.AddTool(&mcpsdk.Tool{Name: "say", Description: "says the text back", InputSchema: schema, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ stdctx.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			var args struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			if f, err := os.OpenFile(os.Getenv("CALLS"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				fmt.Fprintln(f, args.Text)
				f.Close()
			}
			text := fmt.Sprintf("%s: %s (root %s)", os.Getenv("GREETING"), args.Text, os.Getenv("CLAUDE_PLUGIN_ROOT"))
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: text}}}, nil
		})
	return srv
}

// write creates files under dir: path → content ("" for an empty folder
// when the path ends in "/").
func write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for path, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(path))
		if strings.HasSuffix(path, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(path, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// env is a lookup over a fixed environment.
func env(kv ...string) func(string) (string, bool) { return EnvLookup(kv) }

// mustProblems loads dir and returns its problems, failing when it loads.
func mustProblems(t *testing.T, dir string, lookup func(string) (string, bool)) []string {
	t.Helper()
	b, err := Load(dir, lookup)
	if err == nil {
		t.Fatalf("loaded %+v; want problems", b)
	}
	return Problems(err)
}

func containsAll(t *testing.T, got []string, want ...string) {
	t.Helper()
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("problems lack %q:\n%s", w, all)
		}
	}
}
