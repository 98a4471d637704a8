package sessions_test

import (
	stdctx "context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// gatedOpener holds every open until release closes, counting them.
type gatedOpener struct {
	sessions.RegistryOpener
	entered chan string
	release chan struct{}
	fail    atomic.Bool
	opens   atomic.Int32
}

func (g *gatedOpener) Open(ctx stdctx.Context, spec sessions.Spec) (*agents.Handle, error) {
	g.opens.Add(1)
	g.entered <- spec.SessionID
	<-g.release
	if g.fail.Load() {
		return nil, errs.New(errs.PluginFailed, "the opener failed, as told")
	}
	return g.RegistryOpener.Open(ctx, spec)
}

func ensureOpts(id string) sessions.EnsureOptions {
	return sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "coder", SessionID: id, Options: agents.Options{Provider: "scripted"}}}
}

type ensured struct {
	info sessions.Info
	err  error
}

func ensureAsync(e *env, o sessions.EnsureOptions) <-chan ensured {
	out := make(chan ensured, 1)
	go func() {
		in, err := e.ctl.Ensure(stdctx.Background(), o)
		out <- ensured{in, err}
	}()
	return out
}

// Two Ensures of one id: the second waits for the first's open to end
// and joins it — one agent, no second open, no error.
func TestEnsureJoinsAConcurrentOpenOfTheSameSession(t *testing.T) {
	g := &gatedOpener{entered: make(chan string, 4), release: make(chan struct{})}
	e := newEnv(t, setup{opener: func(r *agents.Registry) sessions.Opener { g.Registry = r; return g }})
	first := ensureAsync(e, ensureOpts("s1"))
	wait(t, g.entered)
	second := ensureAsync(e, ensureOpts("s1"))
	select {
	case r := <-second:
		t.Fatalf("the second Ensure returned while the first still opened: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	close(g.release)
	a, b := wait(t, first), wait(t, second)
	if a.err != nil || b.err != nil {
		t.Fatalf("ensure: %v / %v", a.err, b.err)
	}
	if a.info.How != sessions.HowCreated || b.info.How != sessions.HowJoined || a.info.AgentID != b.info.AgentID {
		t.Fatalf("first %+v, second %+v: want created then joined, one agent", a.info, b.info)
	}
	if n := g.opens.Load(); n != 1 || len(e.registry.List()) != 1 {
		t.Fatalf("%d opens, %d agents; want 1 and 1", n, len(e.registry.List()))
	}
	if err := e.ctl.Close(stdctx.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
}

// An open that fails wakes its waiter, which then opens the session
// itself rather than joining nothing.
func TestEnsureAfterAFailedConcurrentOpenOpensItself(t *testing.T) {
	g := &gatedOpener{entered: make(chan string, 4), release: make(chan struct{})}
	e := newEnv(t, setup{opener: func(r *agents.Registry) sessions.Opener { g.Registry = r; return g }})
	g.fail.Store(true)
	first := ensureAsync(e, ensureOpts("s2"))
	wait(t, g.entered)
	second := ensureAsync(e, ensureOpts("s2"))
	time.Sleep(20 * time.Millisecond)
	g.release <- struct{}{} // the first open fails
	if r := wait(t, first); !errs.HasCode(r.err, errs.PluginFailed) {
		t.Fatalf("first: %+v", r)
	}
	wait(t, g.entered)
	g.fail.Store(false)
	close(g.release)
	if r := wait(t, second); r.err != nil || r.info.How != sessions.HowCreated {
		t.Fatalf("second: %+v", r)
	}
	if err := e.ctl.Close(stdctx.Background(), "s2"); err != nil {
		t.Fatal(err)
	}
}

// Ensure resumes what is stored, refuses to create under EnsureExisting,
// and refuses an open session under EnsureCreate.
func TestEnsureModes(t *testing.T) {
	e := newEnv(t, setup{dir: t.TempDir()})
	ctx := stdctx.Background()
	o := ensureOpts("kept")
	if in, err := e.ctl.Ensure(ctx, o); err != nil || in.How != sessions.HowCreated {
		t.Fatalf("create: %+v %v", in, err)
	}
	c := o
	c.Mode = sessions.EnsureCreate
	if _, err := e.ctl.Ensure(ctx, c); !errs.Has(err, session.SessionLocked, sessions.ReasonOpenHere) {
		t.Fatalf("create of an open session: %v", err)
	}
	turn, err := e.ctl.Prompt(ctx, "kept", sessions.PromptRequest{Content: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl.Close(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	if in, err := e.ctl.Ensure(ctx, o); err != nil || in.How != sessions.HowResumed || in.Messages == 0 {
		t.Fatalf("resume: %+v %v", in, err)
	}
	x := ensureOpts("never-stored")
	x.Mode = sessions.EnsureExisting
	if _, err := e.ctl.Ensure(ctx, x); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("existing of nothing stored: %v", err)
	}
	if err := e.ctl.Close(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
}

// A session opened by Ensure outlives its streams: only Close ends it.
func TestAnEnsuredSessionOutlivesItsStreams(t *testing.T) {
	e := newEnv(t, setup{opts: sessions.Options{NewHub: sessions.LiveHubs}})
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("long")); err != nil {
		t.Fatal(err)
	}
	st, err := e.ctl.Attach(ctx, "long", sessions.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctl.Info(ctx, "long"); err != nil {
		t.Fatalf("the session closed with its last stream: %v", err)
	}
	if err := e.ctl.Close(ctx, "long"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctl.Info(ctx, "long"); !errs.HasCode(err, sessions.NotFound) {
		t.Fatalf("info after close: %v", err)
	}
}

// Wait answers with the recorded outcome: the first prompt delivered into
// its turn, which completed; a second queued behind the same turn's
// tool call and cancelled is dropped and never ran.
func TestTurnWaitGivesTheRecordedOutcome(t *testing.T) {
	e := newEnv(t, setup{replies: []scripted.Reply{{Text: "hello"}, {ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "done"}}})
	g := e.gateTool("block")
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	turn, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := turn.Wait(ctx)
	if err != nil || r.Outcome != sessions.FateDelivered || !r.Ran() || r.End.Reason != "completed" || r.MessageID != turn.MessageID {
		t.Fatalf("wait: %+v %v", r, err)
	}
	// Asked again, the same answer, from the log.
	if again, err := e.ctl.Wait(ctx, "w", "r1"); err != nil || again.End.Seq != r.End.Seq {
		t.Fatalf("wait again: %+v %v", again, err)
	}

	blocked, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r2", Content: "block"})
	if err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	queued, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r3", Content: "later"})
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan sessions.TurnResult, 2)
	for _, tn := range []sessions.Turn{blocked, queued} {
		go func() {
			r, err := tn.Wait(ctx)
			if err != nil {
				t.Error(err)
			}
			results <- r
		}()
	}
	if err := e.ctl.Cancel(sessions.WithActor(ctx, "the test"), "w"); err != nil {
		t.Fatal(err)
	}
	got := map[string]sessions.TurnResult{}
	for range 2 {
		r := wait(t, results)
		got[r.RequestID] = r
	}
	if r := got["r2"]; r.Outcome != sessions.FateDelivered || !r.Ran() || r.End.Reason != "aborted" {
		t.Fatalf("the cancelled turn: %+v (end %+v)", r, r.End)
	}
	if r := got["r3"]; r.Outcome != sessions.FateDropped || r.Ran() || r.By != "the test" {
		t.Fatalf("the dropped prompt: %+v", r)
	}
	if o, ok, err := e.ctl.Outcome(ctx, "w", "r3"); err != nil || !ok || o.Outcome != sessions.FateDropped {
		t.Fatalf("outcome: %+v %v %v", o, ok, err)
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}

// A stream whose hub drops it for falling behind attaches again by itself:
// its reader gets every seq once, in order, and never the overflow.
func TestAStreamReattachesAfterOverflowWithoutGapOrDuplicate(t *testing.T) {
	e := newEnv(t, setup{opts: sessions.Options{NewHub: sessions.LiveHubsWith(live.Options{Buffer: 2})}})
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("busy")); err != nil {
		t.Fatal(err)
	}
	st, err := e.ctl.Attach(ctx, "busy", sessions.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var last sessions.Turn
	for i := range 5 {
		if last, err = e.ctl.Prompt(ctx, "busy", sessions.PromptRequest{Content: "p" + string(rune('0'+i))}); err != nil {
			t.Fatal(err)
		}
		if _, err := last.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	in, err := e.ctl.Info(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := stdctx.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var seq int64
	for seq < in.LastSeq {
		u, err := st.Next(rctx)
		if err != nil {
			t.Fatalf("after seq %d of %d: %v", seq, in.LastSeq, err)
		}
		if u.Kind != live.KindEvent {
			continue
		}
		if u.Seq != seq+1 {
			t.Fatalf("got seq %d after %d", u.Seq, seq)
		}
		seq = u.Seq
	}
	if st.LastSeq() != in.LastSeq || st.Reattaches() == 0 {
		t.Fatalf("LastSeq %d, want %d; %d re-attaches, want some", st.LastSeq(), in.LastSeq, st.Reattaches())
	}
	if err := e.ctl.Close(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
}

// A stream that answers approvals gets the agent's question and its answer
// reaches the asking call; a stream from the end holds no history.
func TestAStreamAnswersApprovals(t *testing.T) {
	e := newEnv(t, setup{opts: sessions.Options{NewHub: sessions.LiveHubs}})
	ctx := stdctx.Background()
	in, err := e.ctl.Ensure(ctx, ensureOpts("ask"))
	if err != nil {
		t.Fatal(err)
	}
	turn, err := e.ctl.Prompt(ctx, "ask", sessions.PromptRequest{Content: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The turn's outcome is recorded before its last checkpoint reaches
	// the live hub: until the session is idle, the end a stream attaches
	// at may still hold the answer being streamed (as a snapshot).
	if err := e.ctl.Idle(ctx, "ask"); err != nil {
		t.Fatal(err)
	}
	st, err := e.ctl.Attach(ctx, "ask", sessions.AttachOptions{Approvals: true, FromEnd: true, Name: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := approval.Key.Get(e.root)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var got approval.Answer
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, _ = svc.Ask(ctx, approval.Request{AgentID: in.AgentID, Tool: "bash", Summary: "ls"})
	}()
	rctx, cancel := stdctx.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, err := st.Next(rctx)
	if err != nil || u.Kind != live.KindQuestion {
		t.Fatalf("first update from the end: %+v %v (want the question, no history)", u, err)
	}
	if err := st.Answer(u.Question.ID, approval.Answer{Choice: approval.AllowOnce}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got.Choice != approval.AllowOnce {
		t.Fatalf("the asking call got %+v", got)
	}
	if err := e.ctl.Close(ctx, "ask"); err != nil {
		t.Fatal(err)
	}
}

// History reads an open session from memory and a closed one from the
// store; Info describes an open one.
func TestHistoryOpenAndStored(t *testing.T) {
	cat := &storeCatalogLoader{}
	e := newEnv(t, setup{dir: t.TempDir(), opts: sessions.Options{Catalog: cat}})
	cat.st = e.store
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("h")); err != nil {
		t.Fatal(err)
	}
	turn, err := e.ctl.Prompt(ctx, "h", sessions.PromptRequest{Content: "remember me"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := e.ctl.Info(ctx, "h")
	if err != nil || in.Title != "remember me" || in.LastSeq == 0 {
		t.Fatalf("info: %+v %v", in, err)
	}
	open, err := e.ctl.History(ctx, "h", 1)
	if err != nil || len(open) != int(in.LastSeq)-1 || open[0].Seq != 2 {
		t.Fatalf("open history: %d events, %v", len(open), err)
	}
	if err := e.ctl.Close(ctx, "h"); err != nil {
		t.Fatal(err)
	}
	stored, err := e.ctl.History(ctx, "h", 0)
	if err != nil || len(stored) < int(in.LastSeq) {
		t.Fatalf("stored history: %d events, %v", len(stored), err)
	}
}

type storeCatalogLoader struct{ storeCatalog }

func (c *storeCatalogLoader) Load(ctx stdctx.Context, id string) ([]session.Event, error) {
	return c.st.Load(ctx, id)
}

// A prompt still queued when its session closes is answered by the close:
// Wait returns it dropped, reason closed, not an endless wait.
func TestWaitIsAnsweredByTheClose(t *testing.T) {
	e := newEnv(t, setup{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "done"}}})
	g := e.gateTool("block")
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("c")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctl.Prompt(ctx, "c", sessions.PromptRequest{RequestID: "r1", Content: "block"}); err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	queued, err := e.ctl.Prompt(ctx, "c", sessions.PromptRequest{RequestID: "r2", Content: "later"})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan sessions.TurnResult, 1)
	go func() {
		r, err := queued.Wait(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	time.Sleep(20 * time.Millisecond) // the waiter is waiting
	if err := e.ctl.Close(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, got); r.Outcome != sessions.FateDropped || r.Reason != "closed" || r.Ran() {
		t.Fatalf("the queued prompt after the close: %+v", r)
	}
	if _, err := e.ctl.Wait(ctx, "c", "r2"); !errs.HasCode(err, sessions.NotFound) {
		t.Fatalf("Wait on a closed session: %v", err)
	}
}

// A stream tells when a tool call starts running, between its durable
// tool/call and its tool/result: the view an editor marks in progress.
func TestAStreamTellsWhenAToolCallStarts(t *testing.T) {
	e := newEnv(t, setup{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "done"}}, opts: sessions.Options{NewHub: sessions.LiveHubs}})
	g := e.gateTool("block")
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("tools")); err != nil {
		t.Fatal(err)
	}
	st, err := e.ctl.Attach(ctx, "tools", sessions.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := e.ctl.Prompt(ctx, "tools", sessions.PromptRequest{Content: "go"}); err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	rctx, cancel := stdctx.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var call string
	for {
		u, err := st.Next(rctx)
		if err != nil {
			t.Fatal(err)
		}
		if u.Kind == live.KindEvent && u.Event.Type == session.ToolCall {
			call = u.Event.ToolCall.ID
		}
		if u.Kind == live.KindToolStart {
			if call == "" || u.ToolStart.CallID != call || u.ToolStart.Name != "block" || u.ToolStart.Turn != 1 {
				t.Fatalf("tool start %+v after the call %q", u.ToolStart, call)
			}
			break
		}
	}
	if err := e.ctl.Cancel(ctx, "tools"); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl.Close(ctx, "tools"); err != nil {
		t.Fatal(err)
	}
}

// A refusal that is not the message's recorded fate — here a failing
// admission check, which leaves no record in the log — still answers
// Wait: a client that lost the answer to its Prompt does not wait forever.
func TestWaitIsAnsweredByARefusalTheLogDoesNotHold(t *testing.T) {
	e := newEnv(t, setup{})
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		return agentcontroller.Decision{}, errors.New("the check broke")
	})
	if _, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "hi"}); err == nil {
		t.Fatal("the prompt was admitted past a failing check")
	}
	wctx, cancel := stdctx.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := e.ctl.Wait(wctx, "w", "r1")
	if err != nil || r.Outcome != sessions.FateRefused || r.Ran() || r.Reason != agentcontroller.ReasonAdmissionFailed {
		t.Fatalf("wait: %+v %v", r, err)
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}

// Info names the tools the session's agent offers its model, so that an
// entry point (dsh run's --allow) checks a tool name without reaching
// into the agent.
func TestInfoNamesTheAgentsTools(t *testing.T) {
	e := newEnv(t, setup{})
	e.gateTool("block")
	ctx := stdctx.Background()
	in, err := e.ctl.Ensure(ctx, ensureOpts("tooled"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(in.Tools, "block") || !slices.IsSorted(in.Tools) {
		t.Fatalf("Ensure's Info names the tools %q; want block among them, sorted", in.Tools)
	}
	if got, err := e.ctl.Info(ctx, "tooled"); err != nil || !slices.Equal(got.Tools, in.Tools) {
		t.Fatalf("Info names the tools %q (%v); Ensure named %q", got.Tools, err, in.Tools)
	}
	if err := e.ctl.Close(ctx, "tooled"); err != nil {
		t.Fatal(err)
	}
}
