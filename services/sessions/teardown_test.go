package sessions_test

import (
	stdctx "context"
	"errors"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
)

// gone checks that nothing of session s is left: no record, no agent, no
// in-memory session.
func (e *env) gone(s *sessions.Session) {
	e.t.Helper()
	if _, ok := e.ctl.Get(s.ID()); ok {
		e.t.Fatalf("the controller still holds session %s", s.ID())
	}
	if _, ok := e.registry.Get(s.AgentID()); ok {
		e.t.Fatalf("agent %s is still registered", s.AgentID())
	}
	if _, ok := e.store.Get(s.ID()); ok {
		e.t.Fatalf("session %s is still in memory", s.ID())
	}
}

func TestClosingASessionDisposesExactlyItsAgent(t *testing.T) {
	e := newEnv(t, setup{dir: t.TempDir(), replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "done"}}})
	g := e.gateTool("block")
	a, b := e.open(sessions.OpenOptions{}), e.open(sessions.OpenOptions{})
	if _, err := a.Prompt(stdctx.Background(), sessions.PromptRequest{Content: "go"}); err != nil {
		t.Fatal(err)
	}
	g.wait(t) // a's turn is running when it closes
	if err := e.ctl.Close(stdctx.Background(), a.ID()); err != nil {
		t.Fatal(err)
	}
	e.gone(a)
	evs := e.persisted(a.ID())
	if last := evs[len(evs)-1]; last.Type != session.TurnEnd {
		t.Fatalf("the last event on disk is %s, want the closing turn/end", last.Type)
	}
	if _, err := a.Prompt(stdctx.Background(), sessions.PromptRequest{Content: "more"}); !errs.HasCode(err, sessions.Closed) {
		t.Fatalf("prompt to a closed session: %v", err)
	}
	if err := e.ctl.Close(stdctx.Background(), a.ID()); !errs.HasCode(err, sessions.NotFound) {
		t.Fatalf("closing it again by id: %v", err)
	}
	// The sibling is untouched.
	if got, ok := e.registry.Get(b.AgentID()); !ok || got.Status() == agents.StatusDisposed || !b.Open() {
		t.Fatal("closing a disposed its sibling")
	}
	if _, ok := e.store.Get(b.ID()); !ok {
		t.Fatal("closing a removed its sibling's session")
	}
	if err := b.Detach(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	e.gone(b)
}

// holdOpener hands out the handle its inner opener made only once released,
// so a test can make the owner go away in between.
type holdOpener struct {
	inner   sessions.Opener
	got     chan stdctx.Context // the ctx the held resume was given
	release chan struct{}
}

func (o *holdOpener) Open(ctx stdctx.Context, s sessions.Spec) (*agents.Handle, error) {
	return o.inner.Open(ctx, s)
}

func (o *holdOpener) Resume(ctx stdctx.Context, s sessions.Spec) (*agents.Handle, error) {
	h, err := o.inner.Resume(ctx, s)
	if err == nil && o.got != nil {
		o.got <- ctx
		<-o.release
	}
	return h, err
}

func newHoldEnv(t *testing.T) (*env, *holdOpener, string) {
	t.Helper()
	hold := &holdOpener{}
	e := newEnv(t, setup{dir: t.TempDir(), opener: func(reg *agents.Registry) sessions.Opener {
		hold.inner = sessions.RegistryOpener{Registry: reg}
		return hold
	}})
	s := e.open(sessions.OpenOptions{})
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	e.idle(s)
	if err := s.Detach(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	hold.got, hold.release = make(chan stdctx.Context), make(chan struct{})
	return e, hold, s.ID()
}

func resumeAsync(e *env, ctx stdctx.Context, id string) chan error {
	ch := make(chan error, 1)
	go func() {
		s, err := e.ctl.Resume(ctx, id, sessions.OpenOptions{Agent: "coder", Options: agents.Options{Provider: "scripted"}})
		if err == nil {
			err = errors.New("resume succeeded: " + s.ID())
		}
		ch <- err
	}()
	return ch
}

func TestAResumeWhoseCallerLeftDisposesItsHandle(t *testing.T) {
	e, hold, id := newHoldEnv(t)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	done := resumeAsync(e, ctx, id)
	wait(t, hold.got)
	cancel()
	close(hold.release)
	if err := wait(t, done); !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("want the caller's cancellation, got %v", err)
	}
	if n := len(e.registry.List()); n != 0 {
		t.Fatalf("%d agents left registered", n)
	}
	if _, held := e.store.Get(id); held {
		t.Fatal("the resumed session is still in memory")
	}
	// Its lease is free again: a resume now succeeds.
	hold.got = nil
	s, err := e.ctl.Resume(stdctx.Background(), id, sessions.OpenOptions{Agent: "coder", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	s.Detach(stdctx.Background())
}

func TestAResumePendingWhenTheControllerGoesDisposesItsHandle(t *testing.T) {
	e, hold, id := newHoldEnv(t)
	done := resumeAsync(e, stdctx.Background(), id)
	opening := wait(t, hold.got)
	disposed := make(chan error, 1)
	go func() { disposed <- e.fiber.Dispose(stdctx.Background()) }()
	// The opener's ctx ends once the controller is stopping.
	wait(t, opening.Done())
	close(hold.release)
	if err := wait(t, done); !errs.HasCode(err, sessions.Stopped) {
		t.Fatalf("want %s, got %v", sessions.Stopped, err)
	}
	if err := wait(t, disposed); err != nil {
		t.Fatal(err)
	}
	if n := len(e.registry.List()); n != 0 {
		t.Fatalf("%d agents left registered", n)
	}
	if _, held := e.store.Get(id); held {
		t.Fatal("the resumed session is still in memory")
	}
}

func TestDisposingTheControllerClosesEverySession(t *testing.T) {
	e := newEnv(t, setup{})
	a, b := e.open(sessions.OpenOptions{}), e.open(sessions.OpenOptions{KeepRunning: true})
	if _, err := a.Prompt(stdctx.Background(), sessions.PromptRequest{Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := e.fiber.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	e.gone(a)
	e.gone(b)
	if _, err := e.ctl.Open(stdctx.Background(), sessions.OpenOptions{Agent: "coder"}); !errs.HasCode(err, sessions.Stopped) {
		t.Fatalf("open after dispose: %v", err)
	}
}

func TestTheLastOwnerLeavingClosesTheSession(t *testing.T) {
	e := newEnv(t, setup{})
	s := e.open(sessions.OpenOptions{})
	tab, err := s.Attach(stdctx.Background(), sessions.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Detach(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	s.Detach(stdctx.Background()) // a second detach of the opener counts nothing
	if !s.Open() {
		t.Fatal("the session closed while a client was attached")
	}
	if err := tab.Detach(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	e.gone(s)
	if _, err := s.Attach(stdctx.Background(), sessions.AttachOptions{}); !errs.HasCode(err, sessions.Closed) {
		t.Fatalf("attach to a closed session: %v", err)
	}
}

func TestAKeepRunningSessionOutlivesItsClients(t *testing.T) {
	e := newEnv(t, setup{})
	s := e.open(sessions.OpenOptions{KeepRunning: true})
	tab, _ := s.Attach(stdctx.Background(), sessions.AttachOptions{})
	tab.Detach(stdctx.Background())
	s.Detach(stdctx.Background())
	if !s.Open() {
		t.Fatal("a keep-running session closed with its last client")
	}
	if _, ok := e.registry.Get(s.AgentID()); !ok {
		t.Fatal("its agent is gone")
	}
	if err := e.ctl.Close(stdctx.Background(), s.ID()); err != nil {
		t.Fatal(err)
	}
	e.gone(s)
}

// A Close cut short by its context leaves the session closing; opening it
// again says so (not "attach to it"), and a second Close finishes the job.
func TestReopeningASessionStillClosingSaysCloseItAgain(t *testing.T) {
	e := newEnv(t, setup{dir: t.TempDir(), replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "stubborn"}}}, {Text: "done"}}})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	// The tool ignores its cancellation until released, so the dispose
	// waits for it.
	if err := e.tools.Register(e.root, tools.Tool{Name: "stubborn", Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
		entered <- struct{}{}
		<-release
		return tools.Result{Content: "late"}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	s := e.open(sessions.OpenOptions{})
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{Content: "go"}); err != nil {
		t.Fatal(err)
	}
	wait(t, entered)
	short, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.ctl.Close(short, s.ID()); err == nil {
		t.Fatal("a close that could not finish reported success")
	}
	_, err := e.ctl.Resume(stdctx.Background(), s.ID(), sessions.OpenOptions{Agent: "coder", Options: agents.Options{Provider: "scripted"}})
	if !errs.Has(err, session.SessionLocked, sessions.ReasonClosingHere) {
		t.Fatalf("resume of a closing session: %v", err)
	}
	close(release)
	if err := e.ctl.Close(stdctx.Background(), s.ID()); err != nil {
		t.Fatalf("the second close: %v", err)
	}
	again, err := e.ctl.Resume(stdctx.Background(), s.ID(), sessions.OpenOptions{Agent: "coder", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatalf("resume after the close finished: %v", err)
	}
	if err := e.ctl.Close(stdctx.Background(), again.ID()); err != nil {
		t.Fatal(err)
	}
}
