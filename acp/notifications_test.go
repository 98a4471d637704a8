package acp_test

import (
	stdctx "context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/coder/acp-go-sdk"
	dshacp "github.com/dsh-go/dsh/acp"
)

// records keeps the log records a server writes.
type records struct {
	mu  sync.Mutex
	all []slog.Record
}

func (r *records) Enabled(stdctx.Context, slog.Level) bool { return true }
func (r *records) Handle(_ stdctx.Context, rec slog.Record) error {
	r.mu.Lock()
	r.all = append(r.all, rec)
	r.mu.Unlock()
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) at(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.all {
		if rec.Level >= level {
			out = append(out, rec.Message)
		}
	}
	return out
}

// A notification the server does not know is ignored, as the spec has a
// receiver do, and logged at debug: an operator reading errors must not
// see one for a newer editor's notification. The connection goes on.
func TestUnknownNotificationIsIgnoredQuietly(t *testing.T) {
	h, done := startHost(t, "plugins:\n  - use: llm.scripted\nagents:\n  - id: main\n    provider: scripted\n")
	defer done()
	logs := &records{}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := dshacp.Serve(stdctx.Background(), inR, outW, dshacp.Options{Sessions: h.Sessions(), Agent: "main", Version: "test", Log: slog.New(logs)})
		outW.Close()
		served <- err
	}()
	conn := acp.NewClientSideConnection(newClient(), inW, outR)
	// The raw line is what an editor speaking a newer protocol sends.
	if _, err := inW.Write([]byte(`{"jsonrpc":"2.0","method":"document/didSomethingNew","params":{"uri":"file:///a"}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t}
	if _, err := conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	inW.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	<-conn.Done()
	if errs := logs.at(slog.LevelWarn); len(errs) > 0 {
		t.Fatalf("an unknown notification was logged at warn or above: %q", errs)
	}
	if len(logs.at(slog.LevelDebug)) == 0 {
		t.Fatal("the ignored notification left no debug record")
	}
}
