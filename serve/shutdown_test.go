package serve_test

import (
	stdctx "context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/session"
)

// stored reads a session's persisted log.
func (e *env) stored(id string) []session.Event {
	e.t.Helper()
	st, err := session.Key.Get(e.h.Root())
	if err != nil {
		e.t.Fatal(err)
	}
	evs, err := st.Load(stdctx.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func waitGate(t *testing.T) {
	t.Helper()
	select {
	case <-gate.started:
	case <-time.After(patience):
		t.Fatal("the tool did not start")
	}
}

// shutdownWhileRunning starts a turn held in the gate tool, a stream, and
// Shutdown with the given deadline; it returns what Shutdown returned
// once it does, after run had its turn while the shutdown waited.
func shutdownWhileRunning(t *testing.T, deadline time.Duration, run func(e *env)) (*env, string, error) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "after the gate"}}})
	id := e.open(nil)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	s := e.stream(ctx, id, nil)
	e.send(id, "r1", "go through the gate")
	waitGate(t)

	sctx, scancel := stdctx.WithTimeout(stdctx.Background(), deadline)
	defer scancel()
	done := make(chan error, 1)
	go func() { done <- e.shutdown(sctx) }()
	// New requests are refused while it shuts down.
	for {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/v1/health", nil)
		e.srv.Handler().ServeHTTP(rec, req)
		if rec.Code == http.StatusServiceUnavailable {
			e.doc.check(t, "GET", "/v1/health", response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()})
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The stream ends.
	for {
		if _, ok := s.next(t); !ok {
			break
		}
	}
	s.close()
	run(e)
	var err error
	select {
	case err = <-done:
	case <-time.After(patience):
		t.Fatal("Shutdown did not return")
	}
	if serveErr := <-e.served; !errors.Is(serveErr, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", serveErr)
	}
	return e, id, err
}

// A turn that ends before the deadline finishes; its session is closed and
// flushed.
func TestShutdownLetsTurnsFinish(t *testing.T) {
	e, id, err := shutdownWhileRunning(t, patience, func(*env) { openGate() })
	if err != nil {
		t.Fatal(err)
	}
	evs := e.stored(id)
	last := evs[len(evs)-1]
	if last.Type != session.TurnEnd || last.Reason != "completed" || evs[len(evs)-3].Message == nil || evs[len(evs)-3].Message.Content != "after the gate" {
		t.Fatalf("stored log ends %+v", evs[len(evs)-3:])
	}
	if _, open := e.h.Sessions().Get(id); open {
		t.Fatal("the session is still open")
	}
}

// A turn still running at the deadline is cancelled, and its session is
// closed with a turn/end.
func TestShutdownCancelsTurnsAtTheDeadline(t *testing.T) {
	start := time.Now()
	e, id, err := shutdownWhileRunning(t, 300*time.Millisecond, func(*env) {})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > patience {
		t.Fatal("the shutdown did not keep to its deadline")
	}
	evs := e.stored(id)
	last := evs[len(evs)-1]
	if last.Type != session.TurnEnd || last.Reason == "completed" {
		t.Fatalf("stored log ends %+v", last)
	}
	var result string
	for _, ev := range evs {
		if ev.Type == session.ToolResult && ev.Message != nil {
			result = ev.Message.Content
		}
	}
	if result != "cancelled" {
		t.Fatalf("the tool's result %q", result)
	}
	if _, open := e.h.Sessions().Get(id); open {
		t.Fatal("the session is still open")
	}
}
