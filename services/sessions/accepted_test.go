package sessions_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
)

// TestAQueuedMessageIsDurableWhenItsSenderHears: a prompt sent while a
// turn is held in a tool call returns with its message/queued already
// durable, and Outcome reports no outcome for it while it waits.
func TestAQueuedMessageIsDurableWhenItsSenderHears(t *testing.T) {
	e := newEnv(t, setup{dir: t.TempDir(), replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "done"}}})
	g := e.gateTool("block")
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, e, "w")
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r1", Content: "block"}); err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	msgID, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r2", Content: "later"})
	if err != nil {
		t.Fatal(err)
	}
	log := s.Log()
	ev, ok := log.Outcome("r2")
	if !ok || ev.Type != session.MessageQueued || ev.Message == nil || ev.Message.ID != msgID {
		t.Fatalf("r2's record when its sender heard: %+v %v; want its message/queued", ev, ok)
	}
	if ev.Seq > log.Durable() {
		t.Fatalf("r2's message/queued (seq %d) is not durable (%d) when its sender hears", ev.Seq, log.Durable())
	}
	if o, ok := s.RequestOutcome("r2"); ok {
		t.Fatalf("a queued request reports the outcome %+v", o)
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}

// TestAQueuedMessageDroppedIsNotRunAgain: a message recorded as queued and
// then dropped — by a cancel, or by the session's close — has its outcome;
// resuming the session must not queue it again, and its retry is
// answered dropped.
func TestAQueuedMessageDroppedIsNotRunAgain(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, setup{dir: t.TempDir(), replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "done"}}})
			g := e.gateTool("block")
			ctx := stdctx.Background()
			if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
				t.Fatal(err)
			}
			s := mustSession(t, e, "w")
			if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r1", Content: "block"}); err != nil {
				t.Fatal(err)
			}
			g.wait(t)
			if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r2", Content: "later"}); err != nil {
				t.Fatal(err)
			}
			if how == "cancel" {
				if err := e.ctl.Cancel(ctx, "w"); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.ctl.Close(ctx, "w"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
				t.Fatal(err)
			}
			s = mustSession(t, e, "w")
			_, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r2", Content: "later"})
			if !errs.HasCode(err, sessions.MessageDropped) {
				t.Fatalf("r2's retry after the resume: %v; want %s", err, sessions.MessageDropped)
			}
			if err := e.ctl.Idle(ctx, "w"); err != nil {
				t.Fatal(err)
			}
			var types []session.Type
			for _, ev := range s.Log().Events(1) {
				if ev.RequestID == "r2" && ev.Type != session.DecisionRecorded {
					types = append(types, ev.Type)
				}
			}
			if len(types) != 2 || types[0] != session.MessageQueued || types[1] != session.MessageDropped {
				t.Fatalf("r2's events: %v; want message/queued then message/dropped, and no turn", types)
			}
			if err := e.ctl.Close(ctx, "w"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestASteerRecordedAsQueuedEndsAsSteering: a steer accepted while a tool
// call runs is recorded as queued first; when the next step takes it, its
// steering/message comes after that record, so it is the request's
// outcome (merged) and a resume would find nothing to run again. (Here
// the outcome writer stores the record while the tool runs; when the
// driver holds the pen instead, recordSteering appends it first.)
func TestASteerRecordedAsQueuedEndsAsSteering(t *testing.T) {
	e := newEnv(t, setup{dir: t.TempDir(), replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "hold"}}}, {Text: "done"}}})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	if err := e.tools.Register(e.root, tools.Tool{Name: "hold", Description: "holds until released", Execute: func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
		entered <- struct{}{}
		<-release
		return tools.Result{Content: "held"}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, e, "w")
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r1", Content: "go"}); err != nil {
		t.Fatal(err)
	}
	wait(t, entered)
	if _, err := s.Steer(ctx, sessions.PromptRequest{RequestID: "r2", Content: "also this"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := e.ctl.Idle(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	var types []session.Type
	for _, ev := range s.Log().Events(1) {
		if ev.RequestID == "r2" && ev.Type != session.DecisionRecorded {
			types = append(types, ev.Type)
		}
	}
	if len(types) != 2 || types[0] != session.MessageQueued || types[1] != session.SteeringMessage {
		t.Fatalf("r2's events: %v; want message/queued then steering/message", types)
	}
	if o, ok := s.RequestOutcome("r2"); !ok || o.Outcome != sessions.FateMerged {
		t.Fatalf("r2's outcome: %+v %v; want merged", o, ok)
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}
