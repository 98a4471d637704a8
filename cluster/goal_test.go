package cluster_test

import (
	"testing"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestAGoalIsDrivenWhereItsSessionRuns: a goal set through host b on a
// session host a runs is driven by a, from the principal b named, and
// shown through b; closed on a and opened on b, the session's goal goes
// on from where a left it, its spending counted across both hosts.
func TestAGoalIsDrivenWhereItsSessionRuns(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	// Host a checks in once, then waits an hour after the echo's turn.
	a := serviceNode(t, srv, stream, "a", nodeOpts{tail: "goals:\n  min_backoff: 1h\n"})
	b := serviceNode(t, srv, stream, "b", nodeOpts{tail: "goals:\n  min_backoff: 5ms\n  max_backoff: 10ms\n"})
	a.open(t, "g1")
	bob := sessions.Source{Kind: sessions.SourceUser, Entry: "serve", Principal: llm.Principal{Kind: "token", ID: "bob"}}
	g, err := b.svc.Goal(ctxT(t), "g1", sessions.GoalRequest{Op: sessions.GoalSet, Objective: "keep going",
		Budget: session.GoalBudget{Turns: 3}, Source: bob})
	if err != nil || g.State != session.GoalActive || g.By != "token:bob" {
		t.Fatalf("set through b: %+v, %v", g, err)
	}
	eventually(t, "host a to run the first check-in", func() bool {
		g, err := b.svc.Goal(ctxT(t), "g1", sessions.GoalRequest{Op: sessions.GoalShow})
		return err == nil && g.Spent.Turns == 1
	})
	if n := continuations(a.events(t, "g1"), "bob"); n != 1 {
		t.Fatalf("host a sent %d continuations from bob, want 1", n)
	}
	if err := a.h.Sessions().Close(ctxT(t), "g1"); err != nil {
		t.Fatal(err)
	}
	// Host b opens the session and drives its goal on.
	if _, err := b.svc.Ensure(ctxT(t), sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "g1", KeepRunning: true},
		Mode: sessions.EnsureExisting}); err != nil {
		t.Fatal(err)
	}
	var last sessions.Goal
	eventually(t, "the goal to spend its budget on host b", func() bool {
		last, err = b.svc.Goal(ctxT(t), "g1", sessions.GoalRequest{Op: sessions.GoalShow})
		return err == nil && last.State == session.GoalBudgetLimited
	})
	if last.Spent.Turns != 3 || last.CheckIns != 3 {
		t.Fatalf("the goal on b: %+v", last)
	}
	if _, open := b.h.Sessions().Get("g1"); !open {
		t.Fatal("the session is not open on host b")
	}
	if err := b.h.Sessions().Idle(ctxT(t), "g1"); err != nil {
		t.Fatal(err)
	}
	if n := continuations(b.events(t, "g1"), "bob"); n != 3 {
		t.Fatalf("%d continuations from bob in the log, want 3", n)
	}
}

// continuations counts the goal's prompts from principal id.
func continuations(evs []session.Event, id string) int {
	n := 0
	for _, e := range evs {
		if e.Type == session.UserMessage && e.Message.From != nil && e.Message.From.Entry == "goal" && e.Message.From.Principal.ID == id {
			n++
		}
	}
	return n
}
