package mcp

import (
	stdctx "context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An HTTP server that stops listening did not answer anything: the call
// that finds out says it could not be reached, and where, rather than
// that the server "answered with an error" — advice that sends a person
// to the server's logs instead of to its address.
func TestAnUnreachableHTTPServerIsSaidToBeUnreachable(t *testing.T) {
	srv, _ := newTestServer()
	hs := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	t.Cleanup(func() {
		// The client cannot end its session on a server it cannot reach.
		for ss := range srv.Sessions() {
			ss.Close()
		}
		hs.Close()
	})
	cfg := Config{}.Defaults()
	cfg.Name, cfg.URL, cfg.Approval = "web", hs.URL, "allow"
	cfg.RestartBackoff, cfg.RestartBackoffMax = time.Hour, time.Hour
	// Through a listener of the test's own, which it can close while the
	// connection is up.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := strings.TrimPrefix(cfg.URL, "http://")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go proxy(c, target)
		}
	}()
	cfg.URL = "http://" + l.Addr().String()
	root, svc := mustMount(t, cfg)
	bg := stdctx.Background()
	if r := call(t, bg, root, svc, "web__echo", `{"text":"up"}`); r.Content != "up" {
		t.Fatalf("%+v", r)
	}
	l.Close()
	<-done
	closeProxied()
	// The first call may find a pooled connection cut after it sent the
	// request; the next one's dial is refused, and it did not run.
	for i, says := range []string{"", "did not run"} {
		r := call(t, bg, root, svc, "web__echo", `{"text":"down"}`)
		if !r.IsError || strings.Contains(r.Content, "answered") || !strings.Contains(r.Content, "could not be reached at "+cfg.URL) || !strings.Contains(r.Content, says) {
			t.Fatalf("call %d of an unreachable server: %q", i+1, r.Content)
		}
	}
}

// A server that cannot be reached at its first start is named with its
// address.
func TestAnHTTPServerUnreachableAtStartIsNamedWithItsAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	cfg := Config{}.Defaults()
	cfg.Name, cfg.URL = "web", url
	_, _, err = mount(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "could not be reached at "+url) {
		t.Fatalf("the start of an unreachable server: %v", err)
	}
}
