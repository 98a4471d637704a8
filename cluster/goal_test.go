package cluster_test

import (
	"encoding/json"
	"testing"
	"time"

	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
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

// TestAnAdoptedSessionDrivesItsGoal: the host that had a session with an
// active goal died (its lease is never renewed); the host that adopts
// the session drives the goal on until its budget, counted across both
// hosts, runs out.
func TestAnAdoptedSessionDrivesItsGoal(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	fast := nodeOpts{tail: "goals:\n  min_backoff: 5ms\n  max_backoff: 10ms\n"}
	// Host a checks in once and waits an hour after; it adopts nothing,
	// so b is the one that takes the session over.
	a := startNode(t, srv, stream, "a", nodeOpts{tail: "goals:\n  min_backoff: 1h\n", noOpen: true})
	b := startNode(t, srv, stream, "b", fast)
	kv := leases(t, srv, stream)
	ss := a.open(t, "orphaned")
	bob := sessions.Source{Kind: sessions.SourceUser, Entry: "serve", Principal: llm.Principal{Kind: "token", ID: "bob"}}
	if _, err := ss.Goal(ctxT(t), sessions.GoalRequest{Op: sessions.GoalSet, Objective: "carry on",
		Budget: session.GoalBudget{Turns: 3}, Source: bob}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "host a to run the first check-in", func() bool {
		g, err := ss.Goal(ctxT(t), sessions.GoalRequest{Op: sessions.GoalShow})
		return err == nil && g.Spent.Turns == 1
	})
	if err := ss.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// A host took the session and died: its lease is never renewed.
	dead, _ := json.Marshal(natsplugin.LeaseRecord{Holder: "a dead host", HostID: "dead", Since: time.Now()})
	if _, err := kv.Create(ctxT(t), "orphaned", dead); err != nil {
		t.Fatal(err)
	}
	var adopter *node
	var g sessions.Goal
	t.Cleanup(func() {
		if t.Failed() && adopter != nil {
			t.Logf("host %s holds the session; its goal: %+v", adopter.id, g)
		}
	})
	eventually(t, "the adopter to spend the goal's budget", func() bool {
		for _, n := range []*node{a, b} {
			if s, open := n.h.Sessions().Get("orphaned"); open {
				adopter = n
				var err error
				g, err = s.Goal(ctxT(t), sessions.GoalRequest{Op: sessions.GoalShow})
				return err == nil && g.State == session.GoalBudgetLimited
			}
		}
		return false
	})
	if adopter != b || g.Spent.Turns != 3 || g.CheckIns != 3 {
		t.Fatalf("the goal on host %s: %+v", adopter.id, g)
	}
	if err := adopter.h.Sessions().Idle(ctxT(t), "orphaned"); err != nil {
		t.Fatal(err)
	}
	if n := continuations(adopter.events(t, "orphaned"), "bob"); n != 3 {
		t.Fatalf("%d continuations from bob, want 3", n)
	}
}
