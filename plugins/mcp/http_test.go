package mcp

import (
	"bytes"
	stdctx "context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/llm"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpServer serves the test server over streamable HTTP and records the
// Authorization and X-Team headers it got.
func httpServer(t *testing.T) (Config, *observed, *atomic.Value) {
	srv, o := newTestServer()
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	var seen atomic.Value
	seen.Store("")
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("Authorization") + "|" + r.Header.Get("X-Team"))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	c := Config{}.Defaults()
	c.Name = "web"
	c.URL = hs.URL
	c.Headers = map[string]string{"X-Team": "blue"}
	c.BearerTokenEnv = "DSH_MCP_TEST_TOKEN"
	c.Approval = "allow"
	return c, o, &seen
}

func TestStreamableHTTP(t *testing.T) {
	t.Setenv("DSH_MCP_TEST_TOKEN", "tok-123")
	cfg, _, seen := httpServer(t)
	root, svc := mustMount(t, cfg)
	bg := stdctx.Background()
	if r := call(t, bg, root, svc, "web__echo", `{"text":"over http"}`); r.IsError || r.Content != "over http" {
		t.Fatalf("echo: %+v", r)
	}
	if got := seen.Load().(string); got != "Bearer tok-123|blue" {
		t.Fatalf("headers the server got: %q", got)
	}
	call(t, bg, root, svc, "web__add", `{}`)
	eventually(t, "list_changed over HTTP registers web__extra", func() bool { return svc.Lookup(root, "web__extra") != nil })
}

func TestAMissingBearerTokenIsNamed(t *testing.T) {
	cfg, _, _ := httpServer(t)
	cfg.BearerTokenEnv = "DSH_MCP_TEST_UNSET_TOKEN"
	_, _, err := mount(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "DSH_MCP_TEST_UNSET_TOKEN") {
		t.Fatalf("want the variable named: %v", err)
	}
}

// TestCancelReachesTheServer: when the call's context ends, the SDK sends
// notifications/cancelled and the server's handler sees its context end;
// the call returns the context's error (the turn was aborted).
func TestCancelReachesTheServer(t *testing.T) {
	for _, transport := range []string{"http", "memory"} {
		t.Run(transport, func(t *testing.T) {
			t.Setenv("DSH_MCP_TEST_TOKEN", "x")
			var cfg Config
			var o *observed
			if transport == "http" {
				cfg, o, _ = httpServer(t)
			} else {
				cfg, o = memoryConfig(t)
				cfg.Approval = "allow"
			}
			root, svc := mustMount(t, cfg)
			ctx, cancel := stdctx.WithCancel(stdctx.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := svc.Execute(ctx, root, callOf(cfg.Name+"__slow"))
				errc <- err
			}()
			wait(t, o.started, "the slow call started on the server")
			cancel()
			select {
			case err := <-errc:
				if err == nil {
					t.Fatal("an aborted call must return the context's error")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the cancelled call did not return")
			}
			wait(t, o.cancelled, "the server saw the call's context end")
			eventually(t, "the server received notifications/cancelled", func() bool { return o.saw("notifications/cancelled") })
		})
	}
}

func TestCallTimeoutCancelsAndSaysSo(t *testing.T) {
	cfg, o := memoryConfig(t)
	cfg.Approval = "allow"
	cfg.CallTimeout = 100 * time.Millisecond
	root, svc := mustMount(t, cfg)
	r := call(t, stdctx.Background(), root, svc, "t__slow", `{}`)
	if !r.IsError || !strings.Contains(r.Content, "timed out after 100ms (call_timeout)") || !strings.Contains(r.Content, `"t"`) {
		t.Fatalf("%+v", r)
	}
	wait(t, o.cancelled, "the server saw the timed-out call's context end")
}

func TestResultsThroughTheServer(t *testing.T) {
	cfg, _ := memoryConfig(t)
	cfg.MaxResultBytes = 1000
	root, svc := mustMount(t, cfg)
	bg := stdctx.Background()
	img := testPNG()
	r := call(t, bg, root, svc, "t__image", `{}`)
	if want := fmt.Sprintf("a dot:\n[image: image/png, %d bytes; attached to this result as image 1]", len(img)); r.Content != want {
		t.Fatalf("image: %q, want %q", r.Content, want)
	}
	if len(r.Parts) != 1 || r.Parts[0].Type != llm.PartImage || r.Parts[0].MediaType != "image/png" || !bytes.Equal(r.Parts[0].Data, img) {
		t.Fatalf("image parts: %+v", r.Parts)
	}
	// An image as an embedded resource is attached too; bytes declared an
	// image that are not one, and audio, are described.
	r = call(t, bg, root, svc, "t__mixed", `{}`)
	if len(r.Parts) != 1 || !bytes.Equal(r.Parts[0].Data, img) {
		t.Fatalf("mixed parts: %+v", r.Parts)
	}
	for _, want := range []string{
		fmt.Sprintf("[resource file:///dot.png: image/png, %d bytes; attached to this result as image 1]", len(img)),
		"[image: declared image/png but its bytes are not an image (67 bytes); not attached]",
		"[audio: audio/wav, 12 bytes; audio is not passed on to the model]",
	} {
		if !strings.Contains(r.Content, want) {
			t.Errorf("mixed: %q lacks %q", r.Content, want)
		}
	}
	if r := call(t, bg, root, svc, "t__structured", `{}`); r.Content != `{"n":2}` {
		t.Fatalf("structured: %q", r.Content)
	}
	r = call(t, bg, root, svc, "t__big", `{}`)
	if !strings.HasSuffix(r.Content, "[result cut: the first 1000 of 100000 bytes are shown (max_result_bytes)]") || !strings.HasPrefix(r.Content, "éé") {
		t.Fatalf("big: %q", r.Content[len(r.Content)-120:])
	}
}

func wait(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting until %s", what)
	}
}

// TestAnHTTPServerThatLosesTheSessionIsReconnected: the server restarts
// and forgets the session (it answers 404 for it); the call that finds
// out gets an error result naming the server, and dsh connects anew.
func TestAnHTTPServerThatLosesTheSessionIsReconnected(t *testing.T) {
	var servers []*mcpsdk.Server
	handler := func() http.Handler {
		srv, _ := newTestServer()
		servers = append(servers, srv)
		return mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	}
	t.Cleanup(func() {
		for _, srv := range servers {
			for ss := range srv.Sessions() {
				ss.Close()
			}
		}
	})
	var current atomic.Value
	current.Store(handler())
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		current.Load().(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	cfg := Config{}.Defaults()
	cfg.Name, cfg.URL = "web", hs.URL
	cfg.RestartBackoff, cfg.RestartBackoffMax = 20*time.Millisecond, 100*time.Millisecond
	root, svc := mustMount(t, cfg)
	bg := stdctx.Background()
	if r := call(t, bg, root, svc, "web__echo", `{"text":"one"}`); r.Content != "one" {
		t.Fatalf("%+v", r)
	}
	current.Store(handler()) // the server restarted: the session is unknown now
	r := call(t, bg, root, svc, "web__echo", `{"text":"two"}`)
	if !r.IsError || !strings.Contains(r.Content, `MCP server "web"`) {
		t.Fatalf("the call after the restart: %+v", r)
	}
	eventually(t, "dsh reconnects", func() bool {
		r := call(t, bg, root, svc, "web__echo", `{"text":"three"}`)
		return r.Content == "three"
	})
}
