package maxpending_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/admission/maxpending"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

func TestRefusesWhenTheInboxIsFull(t *testing.T) {
	e := testkit.New(t)
	e.Apply(maxpending.Plugin, maxpending.Config{Max: 2})
	a := e.Agent("a")
	for _, m := range []string{"1", "2"} {
		if _, err := e.Controller.Deliver(stdctx.Background(), a, testkit.Send(m)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.Controller.Deliver(stdctx.Background(), a, testkit.Send("3"))
	if ref, ok := agentcontroller.RefusalOf(err); !ok || ref.Reason != maxpending.Reason {
		t.Fatalf("got %v", err)
	}
	a.Take()
	if _, err := e.Controller.Deliver(stdctx.Background(), a, testkit.Send("4")); err != nil {
		t.Fatalf("after the agent caught up: %v", err)
	}
	if _, err := e.Root.Plugin(maxpending.Plugin, maxpending.Config{}); !errs.Has(err, errs.InvalidArgument, plugin.ReasonInvalidConfig) {
		t.Fatal("max 0 must be refused")
	}
}
