package mcp

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// serverEnv selects the test binary's role: set, it serves the test
// server on stdio instead of running tests.
const serverEnv = "DSH_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		srv, _ := newTestServer()
		if err := srv.Run(stdctx.Background(), &mcpsdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m)
}

// observed is what the in-process test server saw: the methods it
// received (notifications/cancelled among them) and the slow calls whose
// context ended.
type observed struct {
	mu        sync.Mutex
	methods   []string
	started   chan struct{}
	cancelled chan struct{}
}

func (o *observed) saw(method string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range o.methods {
		if m == method {
			return true
		}
	}
	return false
}

var objectSchema = map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "additionalProperties": false}

func text(s string) *mcpsdk.CallToolResult {
	return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s}}}
}

// newTestServer is a real MCP server built with the SDK; the same one
// serves over stdio (the test binary re-executed), HTTP and memory.
func newTestServer() (*mcpsdk.Server, *observed) {
	o := &observed{started: make(chan struct{}, 16), cancelled: make(chan struct{}, 16)}
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil)
	srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx stdctx.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			o.mu.Lock()
			o.methods = append(o.methods, method)
			o.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	readOnly := &mcpsdk.ToolAnnotations{ReadOnlyHint: true}
	add := func(name, desc string, ann *mcpsdk.ToolAnnotations, h func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error)) {
		srv.AddTool(&mcpsdk.Tool{Name: name, Description: desc, Annotations: ann, InputSchema: objectSchema},
			func(ctx stdctx.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				var args map[string]any
				_ = json.Unmarshal(req.Params.Arguments, &args)
				return h(ctx, args)
			})
	}
	echo := func(_ stdctx.Context, a map[string]any) (*mcpsdk.CallToolResult, error) {
		return text(fmt.Sprint(a["text"])), nil
	}
	add("echo", "says the text back", readOnly, echo)
	add("weird.name", "a name providers refuse", nil, echo)
	add("write", "changes things", nil, echo)
	add("slow", "waits until cancelled", nil, func(ctx stdctx.Context, _ map[string]any) (*mcpsdk.CallToolResult, error) {
		o.started <- struct{}{}
		<-ctx.Done()
		o.cancelled <- struct{}{}
		return nil, ctx.Err()
	})
	add("crash", "ends the server process", nil, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	add("image", "an image", readOnly, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "a dot:"}, &mcpsdk.ImageContent{MIMEType: "image/png", Data: testPNG()}}}, nil
	})
	add("mixed", "an image as a resource, a fake image and audio", readOnly, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///dot.png", MIMEType: "image/png", Blob: testPNG()}},
			&mcpsdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 67)},
			&mcpsdk.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF....WAVE")},
		}}, nil
	})
	add("structured", "structured only", readOnly, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{}, StructuredContent: map[string]any{"n": 2}}, nil
	})
	add("big", "100000 bytes", readOnly, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return text(strings.Repeat("é", 50000)), nil
	})
	add("huge", "17 MiB of text, over the default message cap", readOnly, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return text(strings.Repeat("x", 17<<20)), nil
	})
	add("pid", "the server's process id", readOnly, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return text(fmt.Sprint(os.Getpid())), nil
	})
	add("fail", "an error result", readOnly, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "no such issue"}}}, nil
	})
	add("add", "adds the tool extra", nil, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		srv.AddTool(&mcpsdk.Tool{Name: "extra", Description: "added later", InputSchema: objectSchema},
			func(stdctx.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				return text("extra ran"), nil
			})
		return text("added"), nil
	})
	add("drop", "removes the tool extra", nil, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		srv.RemoveTools("extra")
		return text("dropped"), nil
	})
	add("retitle", "changes echo's description", nil, func(stdctx.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		add("echo", "says the text back, changed", readOnly, echo)
		return text("retitled"), nil
	})
	return srv, o
}

// testPNG is a real PNG, a 2×2 image, encoded the same way in the test
// and in the server process.
func testPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// stdioConfig runs the test binary as the server.
func stdioConfig() Config {
	c := Config{}.Defaults()
	c.Name = "t"
	c.Command = os.Args[0]
	c.Env = map[string]string{serverEnv: "1"}
	c.RestartBackoff = 20 * time.Millisecond
	c.RestartBackoffMax = 100 * time.Millisecond
	return c
}

// memoryConfig serves a fresh in-process server over the SDK's in-memory
// transport on each connect.
func memoryConfig(t testing.TB) (Config, *observed) {
	srv, o := newTestServer()
	c := Config{}.Defaults()
	c.Name = "t"
	c.transport = func() (mcpsdk.Transport, error) {
		st, ct := mcpsdk.NewInMemoryTransports()
		ss, err := srv.Connect(stdctx.Background(), st, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { ss.Close() })
		return ct, nil
	}
	return c, o
}

// mount returns a root with the tools service and the plugin applied
// with cfg, and the fiber's error.
func mount(t testing.TB, cfg Config) (*dshctx.Context, *tools.Service, error) {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	f, err := root.Plugin(tools.Plugin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	svc, err := tools.Key.Get(root)
	if err != nil {
		t.Fatal(err)
	}
	f, err = root.Plugin(Plugin, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return root, svc, f.Await(stdctx.Background())
}

func mustMount(t testing.TB, cfg Config) (*dshctx.Context, *tools.Service) {
	t.Helper()
	root, svc, err := mount(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return root, svc
}

func call(t testing.TB, ctx stdctx.Context, root *dshctx.Context, svc *tools.Service, name, args string) tools.Result {
	t.Helper()
	r, err := svc.Execute(ctx, root, tools.Call{ID: "c1", Name: name, Arguments: json.RawMessage(args), Unattended: true})
	if err != nil {
		t.Fatalf("%s: a Go error (a failed turn) instead of a result: %v", name, err)
	}
	return r
}

// eventually polls cond until it holds; the registry announces no
// change, so polling with a deadline is the signal there is.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func callOf(name string) tools.Call {
	return tools.Call{ID: "c1", Name: name, Arguments: json.RawMessage(`{}`), Unattended: true}
}
