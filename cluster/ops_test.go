package cluster_test

import (
	"github.com/dsh-go/dsh/errs"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestAWaitOutlastsItsSlices: a turn that runs longer than the owner
// serves one forwarded wait is waited for in several slices, and the
// caller gets its end.
func TestAWaitOutlastsItsSlices(t *testing.T) {
	// Restored after the hosts closed: their waits read it.
	t.Cleanup(cluster.SetWaitSlice(100 * time.Millisecond))
	srv := startServer(t, 0)
	stream := streamName()
	a := serviceNode(t, srv, stream, "a", nodeOpts{delay: 50 * time.Millisecond})
	b := serviceNode(t, srv, stream, "b", nodeOpts{})
	a.open(t, "s1")
	turn, err := b.svc.Prompt(ctxT(t), "s1", sessions.PromptRequest{Content: "one two three four five six seven eight"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := turn.Wait(ctxT(t))
	if err != nil || !r.Ran() || r.End.Type != session.TurnEnd {
		t.Fatalf("waiting through host b: %+v, %v", r, err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("the turn ended after %s, within two slices: the test shows nothing", waited)
	}
}

// TestACancelThroughAnotherHostNamesWhoCancelled: the actor of a cancel
// sent through host b reaches the owner's record of the messages it
// dropped, and Wait through b returns that outcome.
func TestACancelThroughAnotherHostNamesWhoCancelled(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := serviceNode(t, srv, stream, "a", nodeOpts{delay: time.Hour})
	b := serviceNode(t, srv, stream, "b", nodeOpts{})
	a.open(t, "s1")
	if _, err := b.svc.Prompt(ctxT(t), "s1", sessions.PromptRequest{Content: "take your time"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the turn to run on host a", func() bool {
		in, err := a.svc.Info(ctxT(t), "s1")
		return err == nil && in.Running
	})
	queued, err := b.svc.Prompt(ctxT(t), "s1", sessions.PromptRequest{RequestID: "q1", Content: "behind it"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Cancel(sessions.WithActor(ctxT(t), "the tester on b"), "s1"); err != nil {
		t.Fatal(err)
	}
	r, err := queued.Wait(ctxT(t))
	if err != nil || r.Ran() || r.Outcome != sessions.FateDropped || r.By != "the tester on b" {
		t.Fatalf("the queued prompt after the cancel through b: %+v, %v", r, err)
	}
}

// TestARewindThroughAnotherHost: a rewind sent through host b runs on the
// owner a, names b's actor in its event, and its refusals keep their
// codes across the hop.
func TestARewindThroughAnotherHost(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := serviceNode(t, srv, stream, "a", nodeOpts{})
	b := serviceNode(t, srv, stream, "b", nodeOpts{})
	a.open(t, "s1")
	turn, err := b.svc.Prompt(ctxT(t), "s1", sessions.PromptRequest{Content: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := turn.Wait(ctxT(t)); err != nil || !r.Ran() {
		t.Fatalf("the turn: %+v %v", r, err)
	}
	if _, err := b.svc.Rewind(ctxT(t), "s1", sessions.RewindRequest{To: session.Point{Turn: 1}}); !errs.HasCode(err, sessions.NoCheckpoints) {
		t.Fatalf("a code rewind of a session without checkpoints through b: %v", err)
	}
	if _, err := b.svc.Rewind(ctxT(t), "s1", sessions.RewindRequest{To: session.Point{Turn: 5}, Conversation: true}); !errs.HasCode(err, session.RewindBadPoint) {
		t.Fatalf("a rewind to a turn that never ran through b: %v", err)
	}
	res, err := b.svc.Rewind(sessions.WithActor(ctxT(t), "the tester on b"), "s1", sessions.RewindRequest{To: session.Point{Turn: 1}, Conversation: true})
	if err != nil || res.Event.Type != session.Rewound || res.Event.Rewind.By != "the tester on b" {
		t.Fatalf("rewind through b: %+v %v", res.Event, err)
	}
	evs, err := a.svc.History(ctxT(t), "s1", res.Event.Seq-1)
	if err != nil || len(evs) != 1 || evs[0].Type != session.Rewound {
		t.Fatalf("the owner's log: %+v %v", evs, err)
	}
	if in, err := a.svc.Info(ctxT(t), "s1"); err != nil || in.Messages != 0 {
		t.Fatalf("the owner's history after the rewind holds %d messages (%v)", in.Messages, err)
	}
	if res, err := b.svc.Rewind(ctxT(t), "s1", sessions.RewindRequest{Redo: true}); err != nil || res.Event.Type != session.Redone {
		t.Fatalf("redo through b: %+v %v", res.Event, err)
	}
}
