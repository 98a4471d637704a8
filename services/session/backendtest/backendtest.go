// Package backendtest is the conformance suite of session persistence
// backends: what session.jsonl guarantees, written once and run against
// every backend (session.jsonl, session.nats), so they behave alike.
//
// A backend passes a Fixture: its plugin and a config, which the suite
// mounts as several "processes" (dsh roots) over the same storage, to see
// what one writes and another reads, resumes or is refused.
package backendtest

import (
	stdctx "context"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// Fixture is one backend over one fresh, empty storage.
type Fixture struct {
	// Plugin is the persistence plugin.
	Plugin dshctx.Plugin
	// Config returns the plugin's config; every process the suite mounts
	// gets a config naming the same storage.
	Config func() any
}

// Run runs the suite; open returns a fixture over fresh storage for each
// test.
func Run(t *testing.T, open func(t *testing.T) Fixture) {
	tests := []struct {
		name string
		run  func(*testing.T, Fixture)
	}{
		{"AppendLoadRoundTrip", appendLoadRoundTrip},
		{"FlushMakesEventsVisibleToOthers", flushMakesEventsVisible},
		{"DisposeWritesWhatWasPending", disposeWritesPending},
		{"AgentResumesItsHistory", agentResumes},
		{"ResumeClosesAnInterruptedTurn", resumeRepairs},
		{"StepsAreStoredAsTheyEnd", stepsStoredAsTheyEnd},
		{"SecondWriterIsRefused", secondWriterRefused},
		{"ReleasedWriterIsFenced", releasedWriterFenced},
		{"LoadOfMissingSessionIsNotFound", loadMissing},
		{"ListDescribesSessions", listSessions},
		{"TenantIsStoredWithTheLog", tenantStored},
		{"DeleteRemovesOnlyFreeSessions", deleteSessions},
		{"OutcomesOfAClosedFreshSessionAreStored", outcomesOfAClosedFreshSession},
		{"OutcomesMidTurnAreStored", outcomesMidTurnAreStored},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
}

// process is one dsh over the fixture's storage, without the host.
type process struct {
	root     *dshctx.Context
	store    *session.Store
	registry *agents.Registry
	closed   bool
}

// mount starts a process whose scripted model answers replies in order.
func (f Fixture) mount(t *testing.T, replies ...scripted.Reply) *process {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	p := &process{root: root}
	t.Cleanup(func() { p.close(t) })
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	for _, pl := range []struct {
		plugin dshctx.Plugin
		config any
	}{{scripted.Plugin, scripted.Config{Replies: replies}}, {f.Plugin, f.Config()}, {agentloop.Plugin, agentloop.Config{}}} {
		fib, _ := root.Plugin(pl.plugin, pl.config)
		if err := fib.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if p.store, err = session.Key.Get(root); err != nil {
		t.Fatal(err)
	}
	if p.registry, err = agents.Key.Get(root); err != nil {
		t.Fatal(err)
	}
	return p
}

// close disposes the process, as a host that shuts down does.
func (p *process) close(t *testing.T) {
	t.Helper()
	if p.closed {
		return
	}
	p.closed = true
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	if err := p.root.Dispose(ctx); err != nil {
		t.Errorf("disposing a process: %v", err)
	}
}

// open creates session id in a scope of its own, as an agent would.
func (p *process) open(t *testing.T, agentID, id string) *session.Session {
	t.Helper()
	scope, err := p.root.Scoped(agentID)
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.store.Create(scope, agentID, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (p *process) load(t *testing.T, id string) []session.Event {
	t.Helper()
	events, err := p.store.Load(stdctx.Background(), id)
	if err != nil {
		t.Fatalf("load %s: %v", id, err)
	}
	return events
}
