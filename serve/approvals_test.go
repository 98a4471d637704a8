package serve_test

import (
	stdctx "context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

type pendingOut struct {
	Approvals []struct {
		ID      int64 `json:"id"`
		Request struct {
			Tool    string `json:"tool"`
			AgentID string `json:"agent_id"`
		} `json:"request"`
	} `json:"approvals"`
}

// waitQuestion polls GET .../approvals until a question is pending.
func (e *env) waitQuestion(id string) int64 {
	e.t.Helper()
	deadline := time.Now().Add(patience)
	for {
		var p pendingOut
		e.call("GET", "/v1/sessions/"+id+"/approvals", nil).json(e.t, &p)
		if len(p.Approvals) == 1 {
			if p.Approvals[0].Request.Tool != "ask" {
				e.t.Fatalf("pending %+v", p)
			}
			return p.Approvals[0].ID
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no question pending: %+v", p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A tool call that asks: the question reaches every stream (one that
// connects while it is pending too), a REST call answers it, the streams
// learn it is settled, a second answer is too late. Without any stream
// the question still waits for a REST answer.
func TestApprovalsOverRESTAndStreams(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "ask"}}}, {Text: "done"},
	}})
	id := e.open(nil)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	s1 := e.stream(ctx, id, nil)
	defer s1.close()
	e.send(id, "r1", "use the tool")
	var q1 int64
	var got streamed
	e.consume(t, s1, &got, func(u update) bool {
		if u.Kind == "question" {
			q1 = u.Question.ID
		}
		return q1 != 0
	})
	if pending := e.waitQuestion(id); pending != q1 {
		t.Fatalf("GET approvals has %d, the stream asked %d", pending, q1)
	}
	var detail sessionOut
	e.call("GET", "/v1/sessions/"+id, nil).json(t, &detail)
	if len(detail.Approvals) != 1 || detail.Approvals[0].ID != q1 || !detail.Running {
		t.Fatalf("detail %+v", detail)
	}

	// A page reloaded while the question is pending is asked again, after
	// its backlog.
	s2 := e.stream(ctx, id, nil, "Last-Event-ID", got.lastID)
	defer s2.close()
	var again streamed
	asked := int64(0)
	e.consume(t, s2, &again, func(u update) bool {
		if u.Kind == "question" {
			asked = u.Question.ID
		}
		return asked != 0
	})
	if asked != q1 {
		t.Fatalf("the reconnected stream was asked %d, want %d", asked, q1)
	}

	if r := e.call("POST", "/v1/sessions/"+id+"/approvals/"+itoa(q1), map[string]string{"choice": "allow-once"}); r.status != 200 {
		t.Fatalf("answer: %d %s", r.status, r.body)
	}
	for _, s := range []*eventStream{s1, s2} {
		var by string
		e.consume(t, s, &streamed{}, func(u update) bool {
			if u.Kind == "settled" && u.Settled.QuestionID == q1 {
				by = u.Settled.AnsweredBy
				return true
			}
			return false
		})
		if by != "http" {
			t.Fatalf("settled by %q", by)
		}
	}
	r := e.call("POST", "/v1/sessions/"+id+"/approvals/"+itoa(q1), map[string]string{"choice": "deny"})
	if a := r.err(t); r.status != http.StatusConflict || a.Code != "LIVE_QUESTION_CLOSED" || !strings.Contains(a.Message, `answered by "http"`) {
		t.Fatalf("second answer: %d %s", r.status, r.body)
	}
	evs := e.waitEvents(id, "turn end", turnsEnded(1))
	if res := toolResult(evs); res != "the asked tool ran" {
		t.Fatalf("tool result %q", res)
	}
	var p pendingOut
	if e.call("GET", "/v1/sessions/"+id+"/approvals", nil).json(t, &p); len(p.Approvals) != 0 {
		t.Fatalf("still pending: %+v", p)
	}

	// No stream attached: the question waits for a REST answer.
	s1.close()
	s2.close()
	e.send(id, "r2", "once more")
	q2 := e.waitQuestion(id)
	if q2 == q1 {
		t.Fatal("the second question reused the first's id")
	}
	body, _ := json.Marshal(map[string]string{"choice": "deny", "reason": "not now"})
	if r := e.call("POST", "/v1/sessions/"+id+"/approvals/"+itoa(q2), string(body)); r.status != 200 {
		t.Fatalf("deny: %d %s", r.status, r.body)
	}
	evs = e.waitEvents(id, "second turn end", turnsEnded(2))
	if res := toolResult(evs); !strings.Contains(res, "denied by the user: not now") {
		t.Fatalf("denied tool result %q", res)
	}
}

// The content of the last tool/result.
func toolResult(evs []eventOut) string {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == "tool/result" && evs[i].Message != nil {
			return evs[i].Message.Content
		}
	}
	return ""
}

// TestAnAdoptedSessionBackAgainGetsItsApprover: a cluster closed the
// server's copy of a session under it (another host took the session) and
// later resumed it here again; adopting the new copy replaces what the
// server held for the old one, so the new copy's questions are answered.
func TestAnAdoptedSessionBackAgainGetsItsApprover(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{
		{Text: "first"}, {ToolCalls: []scripted.Call{{Name: "ask"}}}, {Text: "done"},
	}})
	ctx := stdctx.Background()
	old, err := e.h.Sessions().Open(ctx, sessions.OpenOptions{Agent: "main", SessionID: "s1", KeepRunning: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Adopt("s1"); err != nil {
		t.Fatal(err)
	}
	e.send("s1", "r0", "stored")
	if err := e.h.Sessions().Idle(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(ctx); err != nil { // closed under the server
		t.Fatal(err)
	}
	if _, err := e.h.Sessions().Resume(ctx, "s1", sessions.OpenOptions{Agent: "main", KeepRunning: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Adopt("s1"); err != nil {
		t.Fatal(err)
	}
	e.send("s1", "r1", "hello")
	e.send("s1", "r2", "use the tool")
	q := e.waitQuestion("s1")
	if r := e.call("POST", "/v1/sessions/s1/approvals/"+itoa(q), map[string]string{"choice": "allow-once"}); r.status != 200 {
		t.Fatalf("answering the new copy's question: %d %s", r.status, r.body)
	}
}

// TestAReleasedSessionIsLeftToItsCloser: a cluster releases a session
// before it closes this host's copy itself. The server stops answering
// the session's questions and leaves it open — closing it would go back
// through the session service, a cluster's own close — and its shutdown
// does not close it either.
func TestAReleasedSessionIsLeftToItsCloser(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "ask"}}}, {Text: "done"}}})
	id := e.open(nil)
	e.srv.Release(id)
	if _, open := e.h.Sessions().Get(id); !open {
		t.Fatal("Release closed the session")
	}
	// No approver: the call that asks fails closed at once.
	e.send(id, "r1", "use the tool")
	evs := e.waitEvents(id, "turn end", turnsEnded(1))
	if res := toolResult(evs); res == "the asked tool ran" {
		t.Fatalf("a released session's question was answered: %q", res)
	}
	r := e.call("POST", "/v1/sessions/"+id+"/approvals/1", map[string]string{"choice": "allow-once"})
	if a := r.err(t); r.status != http.StatusConflict || !strings.Contains(a.Message, "not opened by this server") {
		t.Fatalf("answering a released session: %d %s", r.status, r.body)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), patience)
	defer cancel()
	if err := e.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, open := e.h.Sessions().Get(id); !open {
		t.Fatal("the shutdown closed a session the server had released")
	}
}

// TestATakenOverSessionWaitsForItsApprover: a host that takes a session
// over resumes its turn before the server attaches as its approver; with
// dsh serve's approver grace the question asked in that gap waits for the
// server's approver instead of failing closed, and the answer given
// through the API runs the tool.
func TestATakenOverSessionWaitsForItsApprover(t *testing.T) {
	e := newEnv(t, envOpts{approverGrace: time.Minute, replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "ask"}}}, {Text: "done"},
	}})
	ctx := stdctx.Background()
	if _, err := e.h.Sessions().Open(ctx, sessions.OpenOptions{Agent: "main", SessionID: "s1", KeepRunning: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.Sessions().Prompt(ctx, "s1", sessions.PromptRequest{RequestID: "r1", Content: "use the tool"}); err != nil {
		t.Fatal(err)
	}
	// The turn asks with no approver attached; without the grace it
	// fails closed at once, and no question is left to answer below.
	st, _ := e.h.Sessions().Get("s1")
	deadline := time.Now().Add(patience)
	for !slices.ContainsFunc(st.Log().Events(0), func(ev session.Event) bool { return ev.Type == session.ToolCall }) {
		if time.Now().After(deadline) {
			t.Fatal("the turn never called its tool")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if err := e.srv.Adopt("s1"); err != nil {
		t.Fatal(err)
	}
	q := e.waitQuestion("s1")
	if r := e.call("POST", "/v1/sessions/s1/approvals/"+itoa(q), map[string]string{"choice": "allow-once"}); r.status != 200 {
		t.Fatalf("answering the question asked before the takeover's approver came: %d %s", r.status, r.body)
	}
	evs := e.waitEvents("s1", "turn end", turnsEnded(1))
	if res := toolResult(evs); res != "the asked tool ran" {
		t.Fatalf("tool result %q, want the asked tool to run", res)
	}
}
