package sessions_test

import (
	stdctx "context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/waterfall"
)

// outcomeOnDisk returns the outcome event of requestID in the stored log
// of session id, if it holds one.
func (e *env) outcomeOnDisk(id, requestID string) (session.Event, bool) {
	e.t.Helper()
	if _, err := os.Stat(filepath.Join(e.dir, id+".jsonl")); errors.Is(err, fs.ErrNotExist) {
		return session.Event{}, false // a session that recorded nothing is not stored
	}
	for _, ev := range e.persisted(id) {
		if ev.RequestID != requestID {
			continue
		}
		switch ev.Type {
		case session.MessageRefused, session.MessageExpired, session.MessageDropped, session.UserMessage, session.SteeringMessage:
			return ev, true
		}
	}
	return session.Event{}, false
}

// refuseWhenReleased is an admission listener that refuses every message,
// once release is closed; holding says it holds one.
func refuseWhenReleased(e *env) (holding chan struct{}, release chan struct{}) {
	holding, release = make(chan struct{}, 1), make(chan struct{})
	agentcontroller.EventAdmission.On(e.root, func(_ stdctx.Context, _ agentcontroller.Admission, _ agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		holding <- struct{}{}
		<-release
		return agentcontroller.Reject("test/no", "not now", false), nil
	})
	return holding, release
}

// TestARefusalDecidedAsTheSessionClosesIsRecorded: admission refuses a
// message after the session's close began — the agent is disposed and
// takes no more messages, but its log is not let go yet. The sender is
// told the message was refused, and so the log must say it too: a retry
// after the session resumes (a webhook's redelivery) is answered from
// it, not decided anew.
func TestARefusalDecidedAsTheSessionClosesIsRecorded(t *testing.T) {
	cat := &storeCatalogLoader{}
	e := newEnv(t, setup{dir: t.TempDir(), opts: sessions.Options{Catalog: cat}})
	cat.st = e.store
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	holding, release := refuseWhenReleased(e)
	answered := make(chan error, 1)
	go func() {
		_, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "hi"})
		answered <- err
	}()
	wait(t, holding)
	var answer error
	agents.EventStatus.On(e.root, func(_ stdctx.Context, c agents.StatusChange) error {
		if c.To == agents.StatusDisposed {
			// The close has begun and has not let the log go: the
			// decision comes now.
			close(release)
			answer = wait(t, answered)
		}
		return nil
	})
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	fate := agentcontroller.OutcomeOf(answer)
	ev, recorded := e.outcomeOnDisk("w", "r1")
	if fate != agentcontroller.OutcomeRefused || !recorded || ev.Type != session.MessageRefused || ev.Reason != "test/no" {
		t.Fatalf("the sender was told %v (outcome %q); the log holds %+v (%v)", answer, fate, ev, recorded)
	}
	// Closed, the session still answers from its stored log.
	if o, ok, err := e.ctl.Outcome(ctx, "w", "r1"); err != nil || !ok || o.Outcome != sessions.FateRefused || o.Seq != ev.Seq {
		t.Fatalf("the outcome read from the stored log: %+v %v %v", o, ok, err)
	}
	// The retry after a resume is answered from the log.
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	_, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "hi"})
	if r, ok := sessions.RejectionOf(err); !ok || r.Reason != "test/no" || r.Outcome != sessions.FateRefused {
		t.Fatalf("the retry after the resume answered %v", err)
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}

// TestARefusalDecidedAfterTheSessionClosedIsNotItsFate: admission refuses
// a message after the session's log was let go. Nothing can record the
// refusal, so it is not the message's fate: the sender is told the
// session closed (no outcome), and the request id is decided anew once
// the session is open again.
func TestARefusalDecidedAfterTheSessionClosedIsNotItsFate(t *testing.T) {
	e := newEnv(t, setup{dir: t.TempDir()})
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	holding, release := refuseWhenReleased(e)
	answered := make(chan error, 1)
	go func() {
		_, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "hi"})
		answered <- err
	}()
	wait(t, holding)
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	close(release)
	answer := wait(t, answered)
	fate := agentcontroller.OutcomeOf(answer)
	ev, recorded := e.outcomeOnDisk("w", "r1")
	if fate != "" || recorded || !errs.HasCode(answer, sessions.Closed) {
		t.Fatalf("the sender was told %v (outcome %q); the log holds %+v (%v)", answer, fate, ev, recorded)
	}
}

// TestARefusalDuringATurnIsTheRequestsOutcomeAtOnce: a prompt refused
// while a turn runs (blocked in a tool) is written to the log before its
// sender is told, not at the turn's end; Outcome (what a webhook's
// redelivery, a cluster's forward or an HTTP retry read) says so, with
// the seq, while the turn still runs, and the same once it ended.
func TestARefusalDuringATurnIsTheRequestsOutcomeAtOnce(t *testing.T) {
	e := newEnv(t, setup{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "done"}}})
	g := e.gateTool("block")
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Message.Content == "no" {
			return agentcontroller.Reject("test/no", "not now", false), nil
		}
		return next.Call(ctx, a)
	})
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "block"}); err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	_, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r2", Content: "no"})
	if r, ok := sessions.RejectionOf(err); !ok || r.Outcome != sessions.FateRefused {
		t.Fatalf("the refused prompt: %v", err)
	}
	o, ok, err := e.ctl.Outcome(ctx, "w", "r2")
	if err != nil || !ok || o.Outcome != sessions.FateRefused || o.Reason != "test/no" || o.RequestID != "r2" || o.MessageID == "" || o.Seq == 0 {
		t.Fatalf("the outcome of the refused prompt while the turn runs: %+v %v %v", o, ok, err)
	}
	if err := e.ctl.Cancel(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	written, ok, err := e.ctl.Outcome(ctx, "w", "r2")
	if err != nil || !ok || written.Outcome != sessions.FateRefused || written.Seq != o.Seq || written.MessageID != o.MessageID {
		t.Fatalf("the outcome once the turn ended: %+v %v %v", written, ok, err)
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}

// TestARefusalIsAnsweredOnceItIsDurable: the sender of a prompt an idle
// session refuses is answered only once the refusal is stored — a crash
// right after the answer must not take it back, or a retry after the
// restart (a webhook's redelivery) would be decided anew.
func TestARefusalIsAnsweredOnceItIsDurable(t *testing.T) {
	e := newEnv(t, setup{dir: t.TempDir()})
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	agentcontroller.EventAdmission.On(e.root, func(_ stdctx.Context, _ agentcontroller.Admission, _ agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		return agentcontroller.Reject("test/no", "not now", false), nil
	})
	blocked, release := make(chan struct{}), make(chan struct{})
	once := false
	session.EventFlush.On(e.root, func(c stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		if _, ok := f.Session.Outcome("r1"); ok && !once {
			once = true
			close(blocked)
			<-release // the store is slow to write the refusal
		}
		return next.Call(c, f)
	})
	answered := make(chan error, 1)
	go func() {
		_, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "hi"})
		answered <- err
	}()
	wait(t, blocked)
	select {
	case err := <-answered:
		close(release)
		t.Fatalf("the sender was answered %v while its refusal was not stored yet", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	err := wait(t, answered)
	if r, ok := sessions.RejectionOf(err); !ok || r.Outcome != sessions.FateRefused {
		t.Fatalf("the answer: %v", err)
	}
	if ev, ok := e.outcomeOnDisk("w", "r1"); !ok || ev.Type != session.MessageRefused {
		t.Fatalf("the refusal on disk once the sender was answered: %+v %v", ev, ok)
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}

// TestARefusalThatRacesACloseRecordsBothOrNeither: the session closes
// between admission's refusal and the hand-over of its outcome — the
// decision record is handed to the agent, the close lets the log go, and
// the outcome then finds no log. The sender is told the session closed,
// so the refusal is not the request's fate, and the log must not keep its
// decision either: the retry after the resume is decided anew, and the
// log holds one decision for the request id, beside its one outcome.
func TestARefusalThatRacesACloseRecordsBothOrNeither(t *testing.T) {
	e := newEnv(t, setup{dir: t.TempDir()})
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	// A turn first, so the session is stored before the race.
	turn, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r0", Content: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	agentcontroller.EventAdmission.On(e.root, func(c stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Message.Content == "no" {
			return agentcontroller.Reject("test/no", "not now", false), nil
		}
		return next.Call(c, a)
	})
	raced := false
	session.EventDecision.On(e.root, func(_ stdctx.Context, d session.Decided) error {
		// Heard after the agent loop took the record: the close runs
		// to its end before the controller hands the outcome over.
		if d.Decision.RequestID == "r1" && !raced {
			raced = true
			closed := make(chan error, 1)
			go func() { closed <- e.ctl.Close(ctx, "w") }()
			if err := wait(t, closed); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	_, err = e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "no"})
	if !raced || !errs.HasCode(err, sessions.Closed) || agentcontroller.OutcomeOf(err) != "" {
		t.Fatalf("the sender of the prompt the close raced was told %v (raced: %v)", err, raced)
	}
	count := func(evs []session.Event) (decisions, outcomes int) {
		for _, ev := range evs {
			switch {
			case ev.Type == session.DecisionRecorded && ev.Decision.RequestID == "r1":
				decisions++
			case ev.RequestID == "r1":
				outcomes++
			}
		}
		return decisions, outcomes
	}
	if d, o := count(e.persisted("w")); d != 0 || o != 0 {
		t.Fatalf("the stored log holds %d decisions and %d outcomes of the request its sender was told the session closed on", d, o)
	}
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	_, err = e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "no"})
	if r, ok := sessions.RejectionOf(err); !ok || r.Reason != "test/no" || r.Outcome != sessions.FateRefused {
		t.Fatalf("the retry after the resume answered %v", err)
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if d, o := count(e.persisted("w")); d != 1 || o != 1 {
		t.Fatalf("after the retry the log holds %d decisions and %d outcomes of the request", d, o)
	}
}
