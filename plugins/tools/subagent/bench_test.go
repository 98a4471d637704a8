package subagent_test

import (
	stdctx "context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
)

// The cost of a subagent: the agent tool's whole call (open the child's
// session, deliver the task through admission, one scripted turn, read the
// answer, close) against the same work done bare through the session
// controller (Open, Prompt, wait for the turn, Close). The ratio is what
// the tool adds: the depth and slot bookkeeping, the approval forwarder,
// the derived session id, the cancel before close and reading the answer
// from the log.
//
//	go test -run XXX -bench . -benchmem ./plugins/tools/subagent/

func BenchmarkBareSession(b *testing.B) {
	e := newEnv(b, setup{child: []scripted.Reply{text("ok")}})
	ctx := stdctx.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s, err := e.ctl.Open(ctx, sessions.OpenOptions{Agent: "alpha", Options: agents.Options{Provider: "child"}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r" + strconv.Itoa(i), Content: "do it"}); err != nil {
			b.Fatal(err)
		}
		if err := e.ctl.Idle(ctx, s.ID()); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSubagentCall(b *testing.B) {
	e := newEnv(b, setup{child: []scripted.Reply{text("ok")}})
	ctx := stdctx.Background()
	parent, err := e.ctl.Open(ctx, sessions.OpenOptions{Agent: "main", Options: agents.Options{Provider: "parent"}})
	if err != nil {
		b.Fatal(err)
	}
	defer parent.Close(ctx)
	args, _ := json.Marshal(map[string]string{"agent": "alpha", "prompt": "do it"})
	at := e.agent(parent).Context()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r, err := e.tools.Execute(ctx, at, tools.Call{AgentID: parent.AgentID(), ID: "call_" + strconv.Itoa(i), Name: "agent", Arguments: args})
		if err != nil || r.IsError || r.Content != "ok" {
			b.Fatalf("%+v %v", r, err)
		}
	}
}
