package serve_test

import (
	stdctx "context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/serve"
	"github.com/hashicorp/go-hclog"
)

// Serving a host's sessions over HTTP: New, Serve on a listener, and
// Shutdown, which closes every session the server opened.
func Example() {
	cfg, _ := config.Parse("example.yaml", []byte("plugins:\n  - use: llm.scripted\nagents:\n  - id: main\n    provider: scripted\n"),
		config.LoadOptions{Environ: []string{}})
	h, _ := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	defer h.Close(stdctx.Background())

	srv, err := serve.New(serve.Options{Sessions: h.Sessions(), Config: cfg, Token: "secret", Version: "example"})
	if err != nil {
		panic(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	req, _ := http.NewRequest("POST", "http://"+l.Addr().String()+"/v1/sessions", strings.NewReader(`{"session_id":"demo"}`))
	req.Header.Set("Authorization", "Bearer secret")
	resp, _ := http.DefaultClient.Do(req)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Location"))

	srv.Shutdown(stdctx.Background())
	fmt.Println(<-served)
	http.DefaultClient.CloseIdleConnections()
	// Output:
	// 201 /v1/sessions/demo
	// http: Server closed
}
