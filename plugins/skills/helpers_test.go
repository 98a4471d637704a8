package skills_test

import (
	stdctx "context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a root with the core services, a scripted model and the agent
// loop; it records every request the model receives.
type env struct {
	t        testing.TB
	root     *dshctx.Context
	registry *agents.Registry

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

func newEnv(t testing.TB, replies []scripted.Reply) *env {
	t.Helper()
	e := &env{t: t}
	var out io.Writer = e
	root := dshctx.New(dshctx.WithLogger(hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Info})))
	ctxtest.Cleanup(t, root)
	e.root = root
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	e.apply(root, scripted.Plugin, scripted.Config{Replies: replies})
	e.apply(root, agentloop.Plugin, agentloop.Config{})
	e.registry, _ = agents.Key.Get(root)
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

// turn runs one turn of a and returns the requests the model received in
// it.
func (e *env) turn(a agents.Agent, text string) []llm.Request {
	e.t.Helper()
	e.mu.Lock()
	e.reqs = nil
	e.mu.Unlock()
	if err := a.Followup(llm.Message{Role: llm.RoleUser, Content: text}); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
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
	return append([]llm.Request(nil), e.reqs...)
}

func hasTool(r llm.Request, name string) bool {
	for _, t := range r.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// copyDir copies the files under src to dst.
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

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
