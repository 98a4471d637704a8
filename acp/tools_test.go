package acp_test

import (
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

func statuses(ns []acp.SessionNotification, id acp.ToolCallId) []acp.ToolCallStatus {
	var out []acp.ToolCallStatus
	for _, n := range ns {
		if tc := n.Update.ToolCall; tc != nil && tc.ToolCallId == id {
			out = append(out, tc.Status)
		}
		if tu := n.Update.ToolCallUpdate; tu != nil && tu.ToolCallId == id && tu.Status != nil {
			out = append(out, *tu.Status)
		}
	}
	return out
}

func equal(a []acp.ToolCallStatus, b ...acp.ToolCallStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A write: pending with its diff, in_progress, completed; the file tools
// need no permission in workspace-write.
func TestToolCallLifecycleWithDiff(t *testing.T) {
	e := newEnv(t, envOpts{presets: []string{"workspace-write"}, replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "write", Arguments: `{"path":"a.txt","content":"new text"}`}}},
		{Text: "written"},
	}})
	id := e.newSession()
	r, err := e.prompt(id, "write it")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r, err)
	}
	ns := e.c.all()
	if got := statuses(ns, "call_1"); !equal(got, "pending", "in_progress", "completed") {
		t.Fatalf("statuses %v: %s", got, dump(ns))
	}
	start := e.c.waitFor(t, "tool_call", func(u acp.SessionUpdate) bool { return u.ToolCall != nil }).ToolCall
	if start.Kind != acp.ToolKindEdit || len(start.Locations) != 1 || start.Locations[0].Path != e.dir+"/a.txt" {
		t.Fatalf("%+v", start)
	}
	if len(start.Content) != 1 || start.Content[0].Diff == nil || start.Content[0].Diff.NewText != "new text" {
		t.Fatalf("no diff: %s", dump(ns))
	}
}

// The approval stage's ask reaches the editor; allow once runs the call,
// reject fails it.
func TestPermissionRoundTrip(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "clock"}}}, {Text: "done"},
	}, extra: "  - use: tools.clock\n"})
	id := e.newSession()
	e.c.answers <- acp.NewRequestPermissionOutcomeSelected("allow-once")
	r, err := e.prompt(id, "time?")
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r, err)
	}
	// clock is a read tool: workspace-write does not ask about it.
	select {
	case p := <-e.c.asked:
		t.Fatalf("asked about clock: %+v", p)
	default:
	}
	<-e.c.answers

	e2 := newEnv(t, envOpts{replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "done"},
		{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "done"},
	}})
	id = e2.newSession()
	openGate()
	e2.c.answers <- acp.NewRequestPermissionOutcomeSelected("allow-once")
	if r, err := e2.prompt(id, "go"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r, err)
	}
	p := <-e2.c.asked
	if p.SessionId != id || p.ToolCall.ToolCallId != "call_1" || len(p.Options) != 3 {
		t.Fatalf("%+v", p)
	}
	if got := statuses(e2.c.all(), "call_1"); !equal(got, "pending", "in_progress", "completed") {
		t.Fatalf("allowed: %v", got)
	}
	e2.c.answers <- acp.NewRequestPermissionOutcomeSelected("reject")
	if r, err := e2.prompt(id, "again"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r, err)
	}
	<-e2.c.asked
	ns := e2.c.all()
	// The second turn's call has the same id: its statuses follow the
	// first call's.
	if got := statuses(ns, "call_1"); !equal(got, "pending", "in_progress", "completed", "pending", "failed") {
		t.Fatalf("rejected: %v", got)
	}
}

// session/cancel during a running tool: the tool's ctx ends and the
// prompt answers cancelled.
func TestCancelDuringATool(t *testing.T) {
	e := newEnv(t, envOpts{mode: "full-access", replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "never"}}})
	id := e.newSession()
	done := make(chan acp.PromptResponse, 1)
	go func() {
		r, err := e.prompt(id, "go")
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case <-gate.started:
	case <-time.After(wait):
		t.Fatal("the tool did not start")
	}
	e.c.waitFor(t, "in_progress", func(u acp.SessionUpdate) bool {
		return u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil && *u.ToolCallUpdate.Status == acp.ToolCallStatusInProgress
	})
	if err := e.conn.Cancel(e.ctx(), acp.CancelNotification{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.StopReason != acp.StopReasonCancelled {
			t.Fatalf("stop %q", r.StopReason)
		}
	case <-time.After(wait):
		t.Fatal("the prompt did not answer after cancel")
	}
	if got := statuses(e.c.all(), "call_1"); got[len(got)-1] != acp.ToolCallStatusFailed {
		t.Fatalf("statuses %v", got)
	}
}

// session/cancel while the editor is asked: the request is withdrawn (its
// ctx ends) and the prompt answers cancelled.
func TestCancelWithdrawsAPendingPermission(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "never"}}})
	id := e.newSession()
	done := make(chan acp.PromptResponse, 1)
	go func() {
		r, err := e.prompt(id, "go")
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case <-e.c.asked:
	case <-time.After(wait):
		t.Fatal("not asked")
	}
	e.conn.Cancel(e.ctx(), acp.CancelNotification{SessionId: id})
	select {
	case <-e.c.permCtxDone:
	case <-time.After(wait):
		t.Fatal("the pending permission request was not withdrawn")
	}
	select {
	case r := <-done:
		if r.StopReason != acp.StopReasonCancelled {
			t.Fatalf("stop %q", r.StopReason)
		}
	case <-time.After(wait):
		t.Fatal("the prompt did not answer after cancel")
	}
}

// A cancel also answers the prompts queued behind the running turn: they
// are dropped, not run later.
func TestCancelDropsQueuedPrompts(t *testing.T) {
	e := newEnv(t, envOpts{mode: "full-access", replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "never"}}})
	id := e.newSession()
	answers := make(chan acp.PromptResponse, 2)
	go func() {
		r, _ := e.prompt(id, "first")
		answers <- r
	}()
	select {
	case <-gate.started:
	case <-time.After(wait):
		t.Fatal("the tool did not start")
	}
	go func() {
		r, _ := e.prompt(id, "queued")
		answers <- r
	}()
	ss := e.h.Sessions().Sessions()[0]
	deadline := time.Now().Add(wait)
	for pending(t, e.h.Sessions(), ss.ID()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second prompt was not queued")
		}
		time.Sleep(time.Millisecond)
	}
	e.conn.Cancel(e.ctx(), acp.CancelNotification{SessionId: id})
	for range 2 {
		select {
		case r := <-answers:
			if r.StopReason != acp.StopReasonCancelled {
				t.Fatalf("stop %q", r.StopReason)
			}
		case <-time.After(wait):
			t.Fatal("a prompt did not answer after cancel")
		}
	}
	for _, ev := range history(t, e.h.Sessions(), ss.ID()) {
		if ev.Type == "user/message" && ev.Message.Content == "queued" {
			t.Fatal("the queued prompt ran after the cancel")
		}
	}
}
