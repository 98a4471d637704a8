package host_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

const sessionsConfig = `
plugins:
  - use: llm.scripted
    config: {replies: [{text: hello there}]}
  - use: session.jsonl
    config: {dir: %s}
agents:
  - id: coder
    provider: scripted
    model: m1
`

// TestSessionControllerOpensThroughTheHost: the host mounts the session
// controller wired to OpenAgent (a built-in preset mounted in the session's
// agent), the store's catalog and the live hub.
func TestSessionControllerOpensThroughTheHost(t *testing.T) {
	dir := t.TempDir()
	h := start(t, fmt.Sprintf(sessionsConfig, dir))
	ctl := h.Sessions()
	if ctl == nil {
		t.Fatal("the host mounts no session controller")
	}
	if got, err := sessions.Key.Get(h.Root()); err != nil || got != ctl {
		t.Fatalf("the controller is not the root's \"sessions\" service: %v", err)
	}
	ctx := stdctx.Background()
	s, err := ctl.Open(ctx, sessions.OpenOptions{Agent: "coder", SessionID: "c1", Presets: []string{"read-only"}})
	if err != nil {
		t.Fatal(err)
	}
	// No provider in the options: the configured agent is the template.
	if s.AgentID() != "coder@c1" {
		t.Fatalf("agent %q", s.AgentID())
	}
	a := agentOf(t, h, s)
	ts, err := tools.Key.Get(a.Context())
	if err != nil || ts.Lookup(a.Context(), "read") == nil || ts.Lookup(a.Context(), "write") != nil {
		t.Fatalf("the read-only preset is not mounted in the session's agent: %v", err)
	}
	tab, err := s.Attach(ctx, sessions.AttachOptions{Approvals: true, Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	client := host.Live(tab)
	if client == nil {
		t.Fatal("the attachment has no live stream")
	}
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r1", Content: "say hello"}); err != nil {
		t.Fatal(err)
	}
	// The stream carries the turn to its end.
	for ended := false; !ended; {
		u, err := client.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ended = u.Kind == live.KindEvent && u.Event.Type == "turn/end"
	}
	if err := tab.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Agent("coder@c1"); ok {
		t.Fatal("closing the session left its agent registered")
	}
	if _, err := os.Stat(filepath.Join(dir, "c1.jsonl")); err != nil {
		t.Fatal(err)
	}
	list, err := ctl.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "c1" || list[0].Agent != "coder@c1" || list[0].Title != "say hello" ||
		list[0].Turns != 1 || list[0].State != session.StateIdle {
		t.Fatalf("list: %+v", list)
	}
	// Resume goes through OpenAgent too, and Delete through the store.
	again, err := ctl.Resume(ctx, "c1", sessions.OpenOptions{Agent: "coder"})
	if err != nil {
		t.Fatal(err)
	}
	if evs, err := ctl.History(ctx, "c1", 0); err != nil || len(evs) == 0 {
		t.Fatal("the resumed session has no history")
	}
	if err := ctl.Delete(ctx, "c1"); err == nil {
		t.Fatal("deleting an open session must be refused")
	}
	if err := again.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Delete(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if list, _ := ctl.List(ctx); len(list) != 0 {
		t.Fatalf("deleted session still listed: %+v", list)
	}
}

// TestTheHostStartsNoAgent: the host starts none of the config's agents,
// also on reload, and a session opens under the configured id.
func TestTheHostStartsNoAgent(t *testing.T) {
	yaml := fmt.Sprintf(sessionsConfig, t.TempDir())
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	if _, ok := h.Agent("coder"); ok {
		t.Fatal("the host started a configured agent")
	}
	s, err := h.Sessions().Open(stdctx.Background(), sessions.OpenOptions{Agent: "coder", AgentID: "coder"})
	if err != nil {
		t.Fatal(err)
	}
	if s.AgentID() != "coder" {
		t.Fatalf("the session's agent runs as %q, want the configured id", s.AgentID())
	}
	before := agentOf(t, h, s)
	changed, err := config.Parse("test.yaml", []byte(strings.Replace(yaml, "model: m1", "model: m2", 1)), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(stdctx.Background(), changed); err != nil {
		t.Fatal(err)
	}
	if !s.Open() {
		t.Fatal("a reload touched the session's agent")
	}
	if a, ok := h.Agent("coder"); !ok || a != before {
		t.Fatal("the session's agent is not registered under the configured id")
	}
	if err := s.Detach(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestARefusedPromptReachesClientsAsANotice: a prompt admission refuses is
// no session event, yet an attached client hears of it, and so does one
// that attaches afterwards.
func TestARefusedPromptReachesClientsAsANotice(t *testing.T) {
	h := start(t, `
plugins:
  - use: llm.scripted
    config: {replies: [{text: hi}]}
  - use: admission.rate-limit
    config: {per_minute: 1, burst: 1}
agents:
  - id: a
    provider: scripted
`)
	ctx := stdctx.Background()
	s, err := h.Sessions().Open(ctx, sessions.OpenOptions{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Detach(ctx)
	early, err := s.Attach(ctx, sessions.AttachOptions{Name: "early"})
	if err != nil {
		t.Fatal(err)
	}
	defer early.Detach(ctx)
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r-ok", Content: "first"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r-refused", Content: "hello"}); !errs.HasCode(err, sessions.PromptRejected) {
		t.Fatalf("want SESSION_PROMPT_REJECTED, got %v", err)
	}
	late, err := s.Attach(ctx, sessions.AttachOptions{Name: "late"})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Detach(ctx)
	for _, tab := range []*sessions.Attachment{early, late} {
		c := host.Live(tab)
		wait, cancel := stdctx.WithTimeout(ctx, 10*time.Second)
		for {
			u, err := c.Next(wait)
			if err != nil {
				cancel()
				t.Fatalf("no notice of the refusal reached the client: %v", err)
			}
			if u.Kind == live.KindNotice {
				if u.Notice.RequestID != "r-refused" || u.Notice.Code != string(sessions.PromptRejected) {
					t.Fatalf("notice %+v", u.Notice)
				}
				break
			}
		}
		cancel()
	}
}

// agentOf returns the live agent of session s from the agents registry of
// h's root: for the tests that look into the agent's scope, which the
// session service does not hand out.
func agentOf(t *testing.T, h *host.Host, s *sessions.Session) agents.Agent {
	t.Helper()
	reg, err := agents.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	a, ok := reg.Get(s.AgentID())
	if !ok {
		t.Fatalf("no agent %s runs for session %s", s.AgentID(), s.ID())
	}
	return a
}
