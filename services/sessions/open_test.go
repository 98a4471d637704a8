package sessions_test

import (
	stdctx "context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

func TestAResumeOfASessionOpenElsewhereIsRefusedWithTheStoresCode(t *testing.T) {
	dir := t.TempDir()
	here, other := newEnv(t, setup{dir: dir}), newEnv(t, setup{dir: dir})
	s := here.open(sessions.OpenOptions{SessionID: "shared"})
	opts := sessions.OpenOptions{Agent: "coder", Options: agents.Options{Provider: "scripted"}}
	if _, err := other.ctl.Resume(stdctx.Background(), "shared", opts); !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) {
		t.Fatalf("resume in another writer: %v", err)
	}
	if len(other.registry.List()) != 0 {
		t.Fatal("the refused resume left an agent")
	}
	if _, err := here.ctl.Resume(stdctx.Background(), "shared", opts); !errs.Has(err, session.SessionLocked, sessions.ReasonOpenHere) {
		t.Fatalf("resume of a session open here: %v", err)
	}
	if _, err := here.ctl.Open(stdctx.Background(), sessions.OpenOptions{Agent: "coder", SessionID: "shared"}); !errs.Has(err, session.SessionLocked, sessions.ReasonOpenHere) {
		t.Fatalf("open of a session open here: %v", err)
	}
	// Something to persist, so there is a log to resume.
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	here.idle(s)
	s.Detach(stdctx.Background())
	got, err := other.ctl.Resume(stdctx.Background(), "shared", opts)
	if err != nil {
		t.Fatalf("resume once the first writer closed: %v", err)
	}
	got.Detach(stdctx.Background())
}

type fakeCatalog struct {
	list    []session.Summary
	deleted []string
}

func (f *fakeCatalog) List(stdctx.Context) ([]session.Summary, error) {
	return slices.Clone(f.list), nil
}

func (f *fakeCatalog) Delete(_ stdctx.Context, id string) error {
	f.deleted = append(f.deleted, id)
	return nil
}

func TestListAndDelete(t *testing.T) {
	bare := newEnv(t, setup{})
	if _, err := bare.ctl.List(stdctx.Background()); !errs.HasCode(err, session.NoPersistence) {
		t.Fatalf("list without a catalog: %v", err)
	}
	if err := bare.ctl.Delete(stdctx.Background(), "x"); !errs.HasCode(err, session.NoPersistence) {
		t.Fatalf("delete without a catalog: %v", err)
	}
	cat := &fakeCatalog{list: []session.Summary{{ID: "old", State: session.StateIdle}, {ID: "live", State: session.StateIdle}}}
	e := newEnv(t, setup{opts: sessions.Options{Catalog: cat}})
	s := e.open(sessions.OpenOptions{SessionID: "live"})
	list, err := e.ctl.List(stdctx.Background())
	if err != nil || len(list) != 2 || list[0].State != session.StateIdle || list[1].State != session.StateOpen ||
		!strings.Contains(list[1].Holder, "this session controller") {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := e.ctl.Delete(stdctx.Background(), "live"); !errs.Has(err, session.SessionLocked, sessions.ReasonOpenHere) {
		t.Fatalf("delete of an open session: %v", err)
	}
	if err := e.ctl.Delete(stdctx.Background(), "old"); err != nil || !slices.Equal(cat.deleted, []string{"old"}) {
		t.Fatalf("delete: %v %v", err, cat.deleted)
	}
	s.Detach(stdctx.Background())
}

func TestTheOpenerGetsTheResolvedSpec(t *testing.T) {
	var got []sessions.Spec
	var mu sync.Mutex
	e := newEnv(t, setup{opener: func(reg *agents.Registry) sessions.Opener {
		return sessions.RegistryOpener{Registry: reg, Setup: func(scope *dshctx.Context, s sessions.Spec) error {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
			if s.Agent == "broken" {
				return errors.New("preset failed")
			}
			return nil
		}}
	}})
	ws := t.TempDir()
	s := e.open(sessions.OpenOptions{Agent: "coder", SessionID: "s1", Presets: []string{"read-only"}, Workspace: ws, Model: "m2",
		Options: agents.Options{Model: "m1", MaxSteps: 3}})
	mu.Lock()
	sp := got[0]
	mu.Unlock()
	if sp.AgentID != "coder@s1" || s.AgentID() != "coder@s1" || sp.SessionID != "s1" || !slices.Equal(sp.Presets, []string{"read-only"}) ||
		sp.Options.Workspace != ws || sp.Options.Model != "m2" || sp.Options.MaxSteps != 3 || sp.Options.Provider != "scripted" {
		t.Fatalf("spec: %+v", sp)
	}
	s.Detach(stdctx.Background())
	if _, err := e.ctl.Open(stdctx.Background(), sessions.OpenOptions{Agent: "broken", Options: agents.Options{Provider: "scripted"}}); err == nil {
		t.Fatal("a failing setup must fail the open")
	}
	if len(e.registry.List()) != 0 || len(e.ctl.Sessions()) != 0 {
		t.Fatal("a failed open left something behind")
	}
}

func TestPresetsWithoutAHostAreRefused(t *testing.T) {
	e := newEnv(t, setup{})
	_, err := e.ctl.Open(stdctx.Background(), sessions.OpenOptions{Agent: "coder", Presets: []string{"read-only"}, Options: agents.Options{Provider: "scripted"}})
	if !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("presets with the bare registry opener: %v", err)
	}
	if _, err := e.ctl.Open(stdctx.Background(), sessions.OpenOptions{}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("open without an agent: %v", err)
	}
}

type fakeHub struct {
	mu      sync.Mutex
	agent   agents.Agent
	clients []*fakeClient
	closed  bool
	// closedAfterDispose: the agent was already unregistered when Close ran.
	closedAfterDispose bool
	reg                *agents.Registry
}

type fakeClient struct {
	after  int64
	closed bool
}

func (c *fakeClient) Close() { c.closed = true }

func (h *fakeHub) Attach(_ stdctx.Context, o sessions.AttachOptions) (sessions.HubClient, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := &fakeClient{after: o.AfterSeq}
	h.clients = append(h.clients, c)
	return c, nil
}

func (h *fakeHub) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.closedAfterDispose = !h.reg.Has(h.agent)
	return nil
}

func TestEachSessionGetsAHubClosedAfterItsAgent(t *testing.T) {
	var hubs []*fakeHub
	var reg *agents.Registry
	e := newEnv(t, setup{opener: func(r *agents.Registry) sessions.Opener { reg = r; return nil }, opts: sessions.Options{NewHub: func(a agents.Agent) (sessions.Hub, error) {
		if a.ID() == "bad@bad" {
			return nil, errors.New("no hub")
		}
		h := &fakeHub{agent: a, reg: reg}
		hubs = append(hubs, h)
		return h, nil
	}}})
	s := e.open(sessions.OpenOptions{})
	tab, err := s.Attach(stdctx.Background(), sessions.AttachOptions{AfterSeq: 7})
	if err != nil {
		t.Fatal(err)
	}
	c := tab.Client().(*fakeClient)
	if len(hubs) != 1 || hubs[0].agent != e.agent(s) || c.after != 7 {
		t.Fatalf("hub %+v, client %+v", hubs, c)
	}
	tab.Detach(stdctx.Background())
	if !c.closed || !s.Open() {
		t.Fatal("detaching a client closes its stream and leaves the opener's session open")
	}
	s.Detach(stdctx.Background())
	if !hubs[0].closed || !hubs[0].closedAfterDispose {
		t.Fatalf("the hub must close after the agent is disposed: %+v", hubs[0])
	}
	_, err = e.ctl.Open(stdctx.Background(), sessions.OpenOptions{Agent: "bad", SessionID: "bad", Options: agents.Options{Provider: "scripted"}})
	if !errs.HasCode(err, errs.PluginFailed) || len(e.registry.List()) != 0 {
		t.Fatalf("a hub that fails to start fails the open and leaves no agent: %v", err)
	}
}
