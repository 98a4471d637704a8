package acp_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/sessions"
)

// A refusal is a JSON-RPC error with dsh's code, the reason and
// presented in its data.
func TestRefusalIsAJSONRPCError(t *testing.T) {
	e := newEnv(t, envOpts{extra: "  - use: test.refuse\n"})
	id := e.newSession()
	_, err := e.prompt(id, "this is forbidden")
	var re *acp.RequestError
	if rpcCode(err) != -32010 {
		t.Fatalf("%v", err)
	}
	re = err.(*acp.RequestError)
	d, _ := re.Data.(map[string]any)
	if d["code"] != "SESSION_PROMPT_REJECTED" || d["reason"] != "test/forbidden" || d["presented"] != false {
		t.Fatalf("data %v", re.Data)
	}
	if r, err := e.prompt(id, "fine"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal("the session did not survive a refusal:", r, err)
	}
}

// session/load replays the history as updates before it answers, then
// the session goes on.
func TestLoadReplaysTheHistory(t *testing.T) {
	store := t.TempDir()
	e := newEnv(t, envOpts{store: store, presets: []string{"workspace-write"}, replies: []scripted.Reply{
		{Text: "first answer"},
		{ToolCalls: []scripted.Call{{Name: "write", Arguments: `{"path":"x.txt","content":"x"}`}}}, {Text: "wrote it"},
	}})
	id := e.newSession()
	if _, err := e.prompt(id, "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.prompt(id, "two"); err != nil {
		t.Fatal(err)
	}
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}

	e2 := newEnv(t, envOpts{store: store, presets: []string{"workspace-write"}})
	e2.conn.Initialize(e2.ctx(), acp.InitializeRequest{ProtocolVersion: 1})
	r, err := e2.conn.LoadSession(e2.ctx(), acp.LoadSessionRequest{SessionId: id, Cwd: e2.dir, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Modes == nil {
		t.Fatal("no modes")
	}
	// The SDK hands notifications over before the response: what came is
	// the whole replay.
	ns := e2.c.all()
	var users []string
	for _, n := range ns {
		if u := n.Update.UserMessageChunk; u != nil {
			users = append(users, u.Content.Text.Text)
		}
	}
	if len(users) != 2 || users[0] != "one" || users[1] != "two" {
		t.Fatalf("user messages %v: %s", users, dump(ns))
	}
	if got := agentText(ns); got != "first answerwrote it" {
		t.Fatalf("agent text %q", got)
	}
	if got := statuses(ns, "call_1"); !equal(got, "pending", "completed") {
		t.Fatalf("replayed tool call %v", got)
	}
	// JSON-RPC ids start over with each connection: this prompt's id is
	// the one "two" had, and it must still be delivered.
	if r, err := e2.prompt(id, "three"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r, err)
	}
	if got := agentText(e2.c.all()); got != "first answerwrote itYou said: three" {
		t.Fatalf("after load: %q", got)
	}
}

// A session open elsewhere is refused with a clear, coded error.
func TestLoadOfALockedSessionIsRefused(t *testing.T) {
	e := newEnv(t, envOpts{})
	other, err := e.h.Sessions().Open(stdctx.Background(), sessions.OpenOptions{Agent: "main"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Detach(stdctx.Background())
	e.newSession()
	_, err = e.conn.LoadSession(e.ctx(), acp.LoadSessionRequest{SessionId: acp.SessionId(other.ID()), Cwd: e.dir, McpServers: []acp.McpServer{}})
	if rpcCode(err) != -32011 {
		t.Fatalf("%v", err)
	}
	if d, _ := err.(*acp.RequestError).Data.(map[string]any); d["code"] != "SESSION_LOCKED" {
		t.Fatalf("%v", err)
	}
	_, err = e.conn.ResumeSession(e.ctx(), acp.ResumeSessionRequest{SessionId: "main-session-nope", Cwd: e.dir})
	if rpcCode(err) != -32002 {
		t.Fatalf("resume of a missing session: %v", err)
	}
}

func TestResumeListAndClose(t *testing.T) {
	store := t.TempDir()
	e := newEnv(t, envOpts{store: store})
	id := e.newSession()
	if _, err := e.prompt(id, "remember me"); err != nil {
		t.Fatal(err)
	}
	l, err := e.conn.ListSessions(e.ctx(), acp.ListSessionsRequest{})
	if err != nil || len(l.Sessions) != 1 || l.Sessions[0].SessionId != id || l.Sessions[0].Title == nil || *l.Sessions[0].Title != "remember me" {
		t.Fatalf("%+v %v", l, err)
	}
	agentID := "main@" + string(id)
	if _, err := e.conn.CloseSession(e.ctx(), acp.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.h.Agent(agentID); ok {
		t.Fatal("close left the agent running")
	}
	if _, err := e.prompt(id, "gone?"); rpcCode(err) != -32002 {
		t.Fatalf("prompt to a closed session: %v", err)
	}
	if _, err := e.conn.CloseSession(e.ctx(), acp.CloseSessionRequest{SessionId: id}); rpcCode(err) != -32002 {
		t.Fatalf("second close: %v", err)
	}
	n := len(e.c.all())
	if _, err := e.conn.ResumeSession(e.ctx(), acp.ResumeSessionRequest{SessionId: id, Cwd: e.dir}); err != nil {
		t.Fatal(err)
	}
	for _, u := range e.c.all()[n:] {
		if u.Update.UserMessageChunk != nil || u.Update.AgentMessageChunk != nil {
			t.Fatalf("resume replayed history: %s", dump(e.c.all()[n:]))
		}
	}
	if r, err := e.prompt(id, "back"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r, err)
	}
}

// _session/steering hands a message to the running turn, through the
// controller; a prompt sent meanwhile is queued behind the turn.
func TestSteerAndQueuedPrompt(t *testing.T) {
	e := newEnv(t, envOpts{mode: "full-access", replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "after the gate"}}})
	id := e.newSession()
	first := make(chan acp.PromptResponse, 1)
	go func() {
		r, err := e.prompt(id, "go")
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	select {
	case <-gate.started:
	case <-time.After(wait):
		t.Fatal("the tool did not start")
	}
	raw, err := e.conn.CallExtension(e.ctx(), "_session/steering", map[string]any{"sessionId": id, "prompt": "also mind the tests"})
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ MessageID string }
	json.Unmarshal(raw, &res)
	second := make(chan acp.PromptResponse, 1)
	go func() {
		r, err := e.prompt(id, "then this")
		if err != nil {
			t.Error(err)
		}
		second <- r
	}()
	openGate()
	for _, ch := range []chan acp.PromptResponse{first, second} {
		select {
		case r := <-ch:
			if r.StopReason != acp.StopReasonEndTurn {
				t.Fatalf("stop %q", r.StopReason)
			}
		case <-time.After(wait):
			t.Fatal("a prompt did not answer")
		}
	}
	var steered, queued bool
	for _, ev := range history(t, e.h.Sessions(), e.h.Sessions().Sessions()[0].ID()) {
		if ev.Message != nil && ev.Message.Content == "also mind the tests" && ev.Type == "steering/message" && ev.Message.ID == res.MessageID {
			steered = true
		}
		if ev.Message != nil && ev.Message.Content == "then this" && ev.Type == "user/message" && ev.Turn == 2 {
			queued = true
		}
	}
	if !steered || !queued {
		t.Fatalf("steered %v queued %v", steered, queued)
	}
	if _, err := e.conn.CallExtension(e.ctx(), "_session/steering", map[string]any{"sessionId": "nope", "prompt": "x"}); rpcCode(err) != -32002 {
		t.Fatalf("steer of an unknown session: %v", err)
	}
}

// A mode switch decides the next call: read-only refuses a write.
func TestSetModeSwitchesAtRuntime(t *testing.T) {
	e := newEnv(t, envOpts{presets: []string{"workspace-write"}, replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "write", Arguments: `{"path":"a.txt","content":"x"}`}}}, {Text: "ok"},
	}})
	id := e.newSession()
	if _, err := e.conn.SetSessionMode(e.ctx(), acp.SetSessionModeRequest{SessionId: id, ModeId: "read-only"}); err != nil {
		t.Fatal(err)
	}
	e.c.waitFor(t, "current_mode_update", func(u acp.SessionUpdate) bool {
		return u.CurrentModeUpdate != nil && u.CurrentModeUpdate.CurrentModeId == "read-only"
	})
	if _, err := e.prompt(id, "write"); err != nil {
		t.Fatal(err)
	}
	if got := statuses(e.c.all(), "call_1"); !equal(got, "pending", "failed") {
		t.Fatalf("read-only let a write run: %v", got)
	}
	if _, err := e.conn.SetSessionMode(e.ctx(), acp.SetSessionModeRequest{SessionId: id, ModeId: "workspace-write"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.prompt(id, "write again"); err != nil {
		t.Fatal(err)
	}
	if got := statuses(e.c.all(), "call_1"); !equal(got, "pending", "failed", "pending", "in_progress", "completed") {
		t.Fatalf("workspace-write: %v", got)
	}
	if _, err := e.conn.SetSessionMode(e.ctx(), acp.SetSessionModeRequest{SessionId: id, ModeId: "yolo"}); rpcCode(err) != -32602 {
		t.Fatalf("unknown mode: %v", err)
	}
}

// "/steer <text>" (the advertised command) steers the running turn and
// answers at once.
func TestSteerCommand(t *testing.T) {
	e := newEnv(t, envOpts{mode: "full-access", replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "done"}}})
	id := e.newSession()
	first := make(chan acp.PromptResponse, 1)
	go func() {
		r, _ := e.prompt(id, "go")
		first <- r
	}()
	select {
	case <-gate.started:
	case <-time.After(wait):
		t.Fatal("the tool did not start")
	}
	if r, err := e.prompt(id, "/steer look left"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r, err)
	}
	openGate()
	if r := <-first; r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r)
	}
	found := false
	for _, ev := range history(t, e.h.Sessions(), e.h.Sessions().Sessions()[0].ID()) {
		if ev.Type == "steering/message" && ev.Message.Content == "look left" && ev.Turn == 1 {
			found = true
		}
	}
	if !found {
		t.Fatal("the steer did not reach the running turn")
	}
}

// session/close during a running tool stops that agent; the waiting
// prompt answers that the session closed.
func TestCloseDuringATool(t *testing.T) {
	e := newEnv(t, envOpts{mode: "full-access", replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "never"}}})
	id := e.newSession()
	errc := make(chan error, 1)
	go func() {
		_, err := e.prompt(id, "go")
		errc <- err
	}()
	select {
	case <-gate.started:
	case <-time.After(wait):
		t.Fatal("the tool did not start")
	}
	if _, err := e.conn.CloseSession(e.ctx(), acp.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if rpcCode(err) != -32012 {
			t.Fatalf("%v", err)
		}
	case <-time.After(wait):
		t.Fatal("the prompt did not answer")
	}
	if _, ok := e.h.Agent("main@" + string(id)); ok {
		t.Fatal("the agent still runs")
	}
}

// A close that times out — a tool ignores its cancellation — leaves the
// session known: once the tool returns, a second session/close finishes
// it, and the session can be loaded again.
func TestACloseThatTimedOutCanBeRetried(t *testing.T) {
	stubborn.started, stubborn.release = make(chan struct{}, 1), make(chan struct{})
	e := newEnv(t, envOpts{mode: "full-access", closeTimeout: 400 * time.Millisecond,
		extra: "  - use: test.stubborn\n", replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "stubborn"}}}, {Text: "done"}}})
	id := e.newSession()
	prompted := make(chan error, 1)
	go func() {
		_, err := e.prompt(id, "go")
		prompted <- err
	}()
	<-stubborn.started
	if _, err := e.conn.CloseSession(e.ctx(), acp.CloseSessionRequest{SessionId: id}); err == nil {
		t.Fatal("the close returned while the tool still ran")
	}
	close(stubborn.release)
	<-prompted
	if _, err := e.conn.CloseSession(e.ctx(), acp.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatalf("the second close: %v", err)
	}
	if _, err := e.conn.CloseSession(e.ctx(), acp.CloseSessionRequest{SessionId: id}); rpcCode(err) != -32002 {
		t.Fatalf("a closed session is unknown: %v", err)
	}
	if _, err := e.conn.LoadSession(e.ctx(), acp.LoadSessionRequest{SessionId: id, Cwd: e.dir, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("load after the close: %v", err)
	}
}

// session/list answers pages of Options.ListPageSize, most recently
// updated first, each with the nextCursor of the next: walking the
// cursors lists every stored session exactly once, and a cursor the
// server never gave is refused as invalid params.
func TestListPagesWithCursors(t *testing.T) {
	e := newEnv(t, envOpts{listPageSize: 2})
	var ids []acp.SessionId
	for i := range 5 {
		id := e.newSession()
		if _, err := e.prompt(id, fmt.Sprintf("session %d", i)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var got []acp.SessionId
	var sizes []int
	req := acp.ListSessionsRequest{}
	for range 10 {
		l, err := e.conn.ListSessions(e.ctx(), req)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(l.Sessions))
		for _, s := range l.Sessions {
			got = append(got, s.SessionId)
		}
		if l.NextCursor == nil {
			break
		}
		req.Cursor = l.NextCursor
	}
	if !slices.Equal(sizes, []int{2, 2, 1}) {
		t.Fatalf("pages of %v sessions; want 2, 2, 1", sizes)
	}
	// Each prompt updated its session after the one before it.
	slices.Reverse(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("the cursors walked %v; want every session once, newest first: %v", got, ids)
	}
	_, err := e.conn.ListSessions(e.ctx(), acp.ListSessionsRequest{Cursor: acp.Ptr("not-a-cursor")})
	if rpcCode(err) != -32602 {
		t.Fatalf("a cursor the server never gave: %v", err)
	}
}
