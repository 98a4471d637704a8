package readygate_test

import (
	stdctx "context"
	"errors"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugins/admission/readygate"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

type result struct {
	id  string
	err error
}

func TestHoldsUntilReady(t *testing.T) {
	e := testkit.New(t)
	e.Apply(readygate.Plugin, readygate.Config{Timeout: time.Minute})
	gate, _ := readygate.Key.Get(e.Root)
	a := e.Agent("a")
	done := make(chan result, 1)
	go func() {
		id, err := e.Controller.Deliver(stdctx.Background(), a, testkit.Send("wait for me"))
		done <- result{id, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("delivered before ready: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
	gate.Report("a", true)
	select {
	case r := <-done:
		if r.err != nil || len(a.Messages()) != 1 {
			t.Fatalf("%+v %v", r, a.Messages())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still held after ready")
	}
}

func TestRefusesAfterTimeoutAndNeverHoldsUnattended(t *testing.T) {
	e := testkit.New(t)
	e.Apply(readygate.Plugin, readygate.Config{Timeout: 30 * time.Millisecond})
	a := e.Agent("a")
	_, err := e.Controller.Deliver(stdctx.Background(), a, testkit.Send("late"))
	// A message that waited out the timeout expired; one refused without
	// waiting (below) was refused.
	if ref, ok := agentcontroller.RefusalOf(err); !ok || ref.Reason != readygate.Reason || !ref.Expired {
		t.Fatalf("timeout: %v", err)
	}

	// With an hour's timeout for people, an unattended message must still
	// be refused at once rather than held.
	e2 := testkit.New(t)
	e2.Apply(readygate.Plugin, readygate.Config{Timeout: time.Hour})
	b := e2.Agent("b")
	hook := testkit.Send("cron")
	hook.Source.Kind = agentcontroller.SourceSchedule
	done := make(chan error, 1)
	go func() {
		_, err := e2.Controller.Deliver(stdctx.Background(), b, hook)
		done <- err
	}()
	select {
	case err := <-done:
		if ref, ok := agentcontroller.RefusalOf(err); !ok || ref.Reason != readygate.Reason || ref.Expired {
			t.Fatalf("unattended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an unattended message was held")
	}
}

func TestSenderCancelEndsTheHold(t *testing.T) {
	e := testkit.New(t)
	e.Apply(readygate.Plugin, readygate.Config{Timeout: time.Hour})
	a := e.Agent("a")
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := e.Controller.Deliver(ctx, a, testkit.Send("x"))
	if !errors.Is(err, stdctx.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}
