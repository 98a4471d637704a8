package commands_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a root with the core services, the agent controller, an echoing
// scripted model and the agent loop; it records what the model receives.
type env struct {
	t        testing.TB
	root     *dshctx.Context
	registry *agents.Registry
	ctl      *agentcontroller.Controller

	mu   sync.Mutex
	reqs []llm.Request
	logs strings.Builder
}

func (e *env) Write(b []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.Write(b)
}

func (e *env) logged() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.String()
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t}
	root := dshctx.New(dshctx.WithLogger(hclog.New(&hclog.LoggerOptions{Output: e, Level: hclog.Info})))
	ctxtest.Cleanup(t, root)
	e.root = root
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	e.apply(root, scripted.Plugin, scripted.Config{})
	e.apply(root, agentloop.Plugin, agentloop.Config{})
	e.apply(root, agentcontroller.Plugin, nil)
	e.registry, _ = agents.Key.Get(root)
	e.ctl, _ = agentcontroller.Key.Get(root)
	agentloop.EventRequest.On(root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		e.mu.Lock()
		e.reqs = append(e.reqs, ev.Request)
		e.mu.Unlock()
		return next.Call(ctx, ev)
	})
	return e
}

func (e *env) apply(at *dshctx.Context, p dshctx.Plugin, cfg any) *dshctx.Fiber {
	e.t.Helper()
	f, err := at.Plugin(p, cfg)
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

func (e *env) create(id, ws string) agents.Agent {
	e.t.Helper()
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: id, Options: agents.Options{
		Provider: "scripted", Workspace: ws, SystemPrompt: "You are a test agent."}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { h.Dispose(stdctx.Background()) })
	return h.Agent
}

// prompt delivers text as a person's prompt, through admission, and
// returns the last user message of the request the model received, or the
// delivery's error.
func (e *env) prompt(a agents.Agent, text string, kind agentcontroller.SourceKind) (llm.Message, error) {
	e.t.Helper()
	e.mu.Lock()
	e.reqs = nil
	e.mu.Unlock()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.ctl.Deliver(ctx, a, agentcontroller.Request{Mode: agentcontroller.Followup, Source: agentcontroller.Source{Kind: kind}, Content: text}); err != nil {
		return llm.Message{}, err
	}
	for {
		e.mu.Lock()
		n := len(e.reqs)
		e.mu.Unlock()
		if n > 0 {
			break
		}
		select {
		case <-ctx.Done():
			e.t.Fatal("no request")
		case <-time.After(time.Millisecond):
		}
	}
	if err := a.WhenIdle(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.reqs[0].History
	for i := h.Len() - 1; i >= 0; i-- {
		if m := h.At(i); m.Role == llm.RoleUser {
			return m, nil
		}
	}
	e.t.Fatal("no user message in the request")
	return llm.Message{}, nil
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// docsFolders lays the documentation's examples out as a workspace and a
// home, and points HOME at the latter.
func docsFolders(t *testing.T) (ws, home string) {
	ws, home = t.TempDir(), t.TempDir()
	copyDir(t, "testdata/claude-code-docs/project", ws)
	copyDir(t, "testdata/claude-code-docs/home", home)
	t.Setenv("HOME", home)
	return ws, home
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
