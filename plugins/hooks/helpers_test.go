package hooks_test

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

// mcpServerEnv set makes the test binary an MCP server on stdio (see
// serveMCP) instead of running the tests.
const mcpServerEnv = "DSH_HOOKS_TEST_MCP_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(mcpServerEnv) != "" {
		serveMCP()
		return
	}
	goleak.VerifyTestMain(m)
}

// logs is a logger output the test can read while hooks write to it.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// rig is a host started from a config, with a workspace and a folder of
// hook scripts.
type rig struct {
	t    testing.TB
	h    *host.Host
	ws   string
	dir  string
	logs *logs
}

// script writes an executable shell script into dir and returns a
// command that runs it.
func script(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// hooksOf builds the inline hooks of one event: one matcher group per
// command.
func hook(matcher, command string, timeout float64) map[string]any {
	h := map[string]any{"type": "command", "command": command}
	if timeout > 0 {
		h["timeout"] = timeout
	}
	g := map[string]any{"hooks": []any{h}}
	if matcher != "" {
		g["matcher"] = matcher
	}
	return g
}

// newRig makes the workspace and the scripts' folder.
func newRig(t testing.TB) *rig {
	return &rig{t: t, ws: t.TempDir(), dir: t.TempDir(), logs: &logs{}}
}

// script writes a hook script into the rig's folder.
func (r *rig) script(name, body string) string { return script(r.t, r.dir, name, body) }

// start runs a host whose config is doc (JSON is YAML) with the workspace
// filled into every agent.
func (r *rig) start(doc map[string]any) *rig {
	t := r.t
	t.Helper()
	if ags, ok := doc["agents"].([]any); ok {
		for _, a := range ags {
			a.(map[string]any)["workspace"] = r.ws
		}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("config.yaml", data, config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	log := hclog.New(&hclog.LoggerOptions{Output: r.logs, Level: hclog.Info})
	r.h, err = hosttest.Start(cfg, host.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Second)
		defer cancel()
		if err := r.h.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return r
}

func (r *rig) agent(id string) agents.Agent {
	r.t.Helper()
	a, ok := r.h.Agent(id)
	if !ok {
		r.t.Fatalf("no agent %s", id)
	}
	return a
}

// approve asks tools/approve about a call of tool in agent's scope, with
// tools registered on the root that just say "ran".
func (r *rig) approve(agentID, tool string, args string) tools.Verdict {
	r.t.Helper()
	svc, err := tools.Key.Get(r.h.Root())
	if err != nil {
		r.t.Fatal(err)
	}
	a := r.agent(agentID)
	call := tools.Call{AgentID: agentID, ID: "call-1", Name: tool, Arguments: json.RawMessage(args), Workspace: r.ws}
	v, err := tools.EventApprove.Dispatch(stdctx.Background(), a.Context(), tools.Approval{Call: call, Tool: svc.Lookup(a.Context(), tool)})
	if err != nil {
		r.t.Fatal(err)
	}
	return v
}

// registerFake registers tools named like dsh's built-ins that only say
// they ran, bash asking by default as the real one does.
func (r *rig) registerFake(names ...string) {
	r.t.Helper()
	svc, err := tools.Key.Get(r.h.Root())
	if err != nil {
		r.t.Fatal(err)
	}
	for _, n := range names {
		tl := tools.Tool{Name: n, Execute: func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
			return tools.Result{Content: "ran " + string(c.Arguments)}, nil
		}}
		if n == "bash" {
			tl.Approval = tools.Ask
		}
		if err := svc.Register(r.h.Root(), tl); err != nil {
			r.t.Fatal(err)
		}
	}
}

// execute runs a call through the whole tool pipeline of agentID:
// validation, approval (nobody attached: an ask is refused), execution.
func (r *rig) execute(agentID, tool, args string) tools.Result {
	r.t.Helper()
	a := r.agent(agentID)
	svc, err := tools.Key.Get(a.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	res, err := svc.Execute(stdctx.Background(), a.Context(), tools.Call{AgentID: agentID, ID: "call-1", Name: tool, Arguments: json.RawMessage(args), Workspace: r.ws})
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

func contains(t *testing.T, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("%s: %q does not contain %q", what, got, want)
	}
}

// scriptedAgent is the config of one agent on the scripted model.
func scriptedAgent(id string, extra map[string]any) map[string]any {
	a := map[string]any{"id": id, "provider": "scripted"}
	for k, v := range extra {
		a[k] = v
	}
	return a
}
