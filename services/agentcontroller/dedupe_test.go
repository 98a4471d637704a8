package agentcontroller_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
)

// memoryBackend serves one saved log for resume.
type memoryBackend struct{ logs map[string][]session.Event }

func (m memoryBackend) Load(_ stdctx.Context, id string) ([]session.Event, error) {
	return m.logs[id], nil
}

func TestRetriedRequestIDIsInsertedOnce(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	req := send("pay the invoice")
	req.RequestID = "req-1"
	id1, err := e.ctl.Deliver(stdctx.Background(), a, req)
	if err != nil {
		t.Fatal(err)
	}
	id2, err := e.ctl.Deliver(stdctx.Background(), a, req)
	if err != nil || id2 != id1 || len(a.Messages()) != 1 {
		t.Fatalf("retry gave %q (first %q), inbox %v, %v", id2, id1, a.Messages(), err)
	}
	// The same request id for another agent is a different request.
	b := e.agent("b")
	if id3, _ := e.ctl.Deliver(stdctx.Background(), b, req); id3 == id1 || len(b.Messages()) != 1 {
		t.Fatal("request ids are per agent")
	}
}

func TestRequestIDsSurviveTheTurnAndAResume(t *testing.T) {
	e := newEnv(t)
	store, _ := session.Key.Get(e.root)
	backend := memoryBackend{logs: map[string][]session.Event{}}
	store.SetBackend(e.root, backend)
	p, _ := e.root.Plugin(scripted.Plugin, nil)
	p.Await(stdctx.Background())
	loop, _ := e.root.Plugin(agentloop.Plugin, nil)
	if err := loop.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	h, err := e.reg.Create(stdctx.Background(), agents.CreateOptions{AgentID: "main", SessionID: "s", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	req := send("hello")
	req.RequestID = "rpc-7"
	id, err := e.ctl.Deliver(stdctx.Background(), h.Agent, req)
	if err != nil {
		t.Fatal(err)
	}
	h.Agent.WhenIdle(stdctx.Background())
	if again, _ := e.ctl.Deliver(stdctx.Background(), h.Agent, req); again != id {
		t.Fatalf("after the turn recorded it: %q vs %q", again, id)
	}
	backend.logs["s"] = h.Agent.Session().Events(1)
	h.Dispose(stdctx.Background())

	r, err := e.reg.Resume(stdctx.Background(), agents.ResumeOptions{AgentID: "main", ResumeSessionID: "s", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Dispose(stdctx.Background())
	before := r.Agent.Session().Len()
	if again, err := e.ctl.Deliver(stdctx.Background(), r.Agent, req); err != nil || again != id {
		t.Fatalf("after resume: %q vs %q (%v)", again, id, err)
	}
	r.Agent.WhenIdle(stdctx.Background())
	if r.Agent.Session().Len() != before {
		t.Fatal("a retried request ran a second turn")
	}
	_ = agentcontroller.Followup
}
