package agentcontroller_test

import (
	stdctx "context"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/agentcontroller"
)

// The prepare stage turns the input into the message's content before
// admission: admission judges what it made, the inbox keeps it; a
// refusal there is recorded like admission's and answered to a retry
// without running the stage again; a failing listener fails the delivery.
func TestThePrepareStageRunsBeforeAdmissionAndItsRefusalIsRecorded(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	prepared := 0
	agentcontroller.EventPrepare.On(e.root, func(ctx stdctx.Context, p agentcontroller.Preparation, next agentcontroller.PrepareNext) (agentcontroller.Preparation, error) {
		prepared++
		switch {
		case p.Content == "/nope":
			return p, agentcontroller.RefusePreparation("test/unknown", "/nope is not a command")
		case p.Content == "/broken":
			return p, errors.New("the listener broke")
		case strings.HasPrefix(p.Content, "/"):
			p.Content = "expanded " + strings.TrimPrefix(p.Content, "/")
		}
		return next.Call(ctx, p)
	})
	var judged []string
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, ad agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		judged = append(judged, ad.Message.Content)
		return next.Call(ctx, ad)
	})

	if _, err := e.ctl.Deliver(stdctx.Background(), a, withID("/review", "r1")); err != nil {
		t.Fatal(err)
	}
	if len(judged) != 1 || judged[0] != "expanded review" {
		t.Fatalf("admission judged %q, want the prepared content", judged)
	}
	if msgs := a.Messages(); len(msgs) != 1 || msgs[0] != "expanded review" {
		t.Fatalf("the inbox holds %+v", msgs)
	}

	_, err := e.ctl.Deliver(stdctx.Background(), a, withID("/nope", "r2"))
	ref, ok := agentcontroller.RefusalOf(err)
	if !ok || ref.Reason != "test/unknown" || agentcontroller.OutcomeOf(err) != agentcontroller.OutcomeRefused {
		t.Fatalf("a refusal of the prepare stage ended as %v", err)
	}
	if len(judged) != 1 {
		t.Fatal("admission judged an input the prepare stage refused")
	}
	before := prepared
	_, err = e.ctl.Deliver(stdctx.Background(), a, withID("/nope", "r2"))
	if ref, ok := agentcontroller.RefusalOf(err); !ok || ref.Reason != "test/unknown" {
		t.Fatalf("the retry answered %v", err)
	}
	if prepared != before {
		t.Fatal("the retry of a recorded refusal ran the prepare stage again")
	}

	_, err = e.ctl.Deliver(stdctx.Background(), a, withID("/broken", "r3"))
	if ref, ok := agentcontroller.RefusalOf(err); !ok || ref.Reason != agentcontroller.ReasonAdmissionFailed || !strings.Contains(ref.Message, "preparing the message") {
		t.Fatalf("a failing prepare listener gave %v", err)
	}
	if len(a.Messages()) != 1 {
		t.Fatalf("a refused or failed input reached the inbox: %+v", a.Messages())
	}
}
