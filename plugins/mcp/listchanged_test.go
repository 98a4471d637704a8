package mcp_test

import (
	stdctx "context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/hosttest"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// A server built with the Go SDK sends tools/list_changed some
// milliseconds after the answer of the call that changed its list. The
// model request right after that call must carry the new list all the
// same: a tool the call added is offered and runs, a tool it removed is
// offered no more and does not run.
func TestTheRequestAfterAListChangeCarriesTheNewList(t *testing.T) {
	yaml := fmt.Sprintf(`
plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: gh__add}]
        - tool_calls: [{name: gh__extra}]
        - tool_calls: [{name: gh__drop}]
        - tool_calls: [{name: gh__extra}]
        - text: done
  - use: tools.mcp
    config:
      name: gh
      command: %q
      env: {DSH_MCP_TEST_SERVER: "1"}
      approval: allow
agents:
  - id: a
    provider: scripted
`, os.Args[0])
	cfg, err := config.Parse("config.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	a, _ := h.Agent("a")
	var mu sync.Mutex
	var offered [][]string // the tool names of each step's request
	_, err = agentloop.EventRequest.On(a.Context(), func(ctx stdctx.Context, e agentloop.RequestEvent, next agentloop.RequestNext) (llm.Request, error) {
		var names []string
		for _, t := range e.Request.Tools {
			names = append(names, t.Name)
		}
		mu.Lock()
		offered = append(offered, names)
		mu.Unlock()
		return next.Call(ctx, e)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Followup(llm.Message{Role: llm.RoleUser, Content: "go"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Second)
	defer cancel()
	if err := a.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(offered) != 5 {
		t.Fatalf("%d model requests", len(offered))
	}
	for step, want := range []bool{false, true, true, false, false} {
		if got := slices.Contains(offered[step], "gh__extra"); got != want {
			t.Errorf("request %d offers gh__extra: %v, want %v (%v)", step+1, got, want, offered[step])
		}
	}
	var results []string
	for _, e := range a.Session().Events(1) {
		if e.Type == session.ToolResult && e.Message != nil {
			results = append(results, e.Message.Content)
		}
	}
	if len(results) != 4 || results[1] != "extra ran" || results[3] == "extra ran" {
		t.Fatalf("the results: %q", results)
	}
}
