package budget_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/plugins/budget"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// start runs a host of the YAML config text until the test ends.
func start(t *testing.T, text string) *host.Host {
	t.Helper()
	cfg, err := config.Parse("budget.yaml", []byte(text), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{LogOutput: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	return h
}

var ann = agentcontroller.Source{Kind: agentcontroller.SourceUser, Entry: "cli",
	Principal: agentcontroller.Principal{Kind: "user", ID: "ann", Tenant: "acme"}}

// prompt sends text as ann and waits for what became of it.
func prompt(t *testing.T, h *host.Host, s *sessions.Session, id, text string) (sessions.TurnResult, error) {
	t.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: id, Content: text, Source: ann}); err != nil {
		return sessions.TurnResult{}, err
	}
	return h.Sessions().Wait(ctx, s.ID(), id)
}

func open(t *testing.T, h *host.Host, agent string) *sessions.Session {
	t.Helper()
	s, err := h.Sessions().Open(stdctx.Background(), sessions.OpenOptions{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const stopConfig = `
pricing:
  models:
    demo: {input: 1, output: 2}
plugins:
  - use: llm.scripted
    config:
      replies:
        - {tool_calls: [{name: clock}], usage: {input_tokens: 600, output_tokens: 10}}
        - {tool_calls: [{name: clock}], usage: {input_tokens: 600, output_tokens: 10}}
        - {text: done, usage: {input_tokens: 600, output_tokens: 10}}
  - use: tools.clock
  - use: admission.budget
    config:
      limits:
        - {name: per-session, per: session, tokens: 1000}
agents:
  - id: main
    provider: scripted
    model: demo
`

// TestABudgetStopsATurn: the turn's second answer spends the session's
// tokens; its tool call is not run, the turn ends with reason budget and
// says which budget ran out, and the next prompt is refused at admission.
func TestABudgetStopsATurn(t *testing.T) {
	h := start(t, stopConfig)
	s := open(t, h, "main")
	res, err := prompt(t, h, s, "r1", "what time is it, twice?")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Ran() || res.End.Reason != sessions.EndBudget {
		t.Fatalf("the turn ended %+v, want reason budget", res.End)
	}
	if !strings.Contains(res.End.Error, budget.ReasonTokens) || !strings.Contains(res.End.Error, `budget "per-session"`) || !strings.Contains(res.End.Error, "1220 of its 1000 tokens") {
		t.Fatalf("turn/end's error does not say which budget ran out: %q", res.End.Error)
	}
	evs, err := h.Sessions().History(stdctx.Background(), s.ID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	answers := 0
	for _, e := range evs {
		switch e.Type {
		case session.ToolResult:
			results = append(results, e.Message.Content)
		case session.AssistantMessage:
			answers++
		}
	}
	if answers != 2 || len(results) != 2 || strings.HasPrefix(results[0], "not executed") || !strings.HasPrefix(results[1], "not executed: budget/tokens") {
		t.Fatalf("want two answers, the first call run and the second not: %d answers, results %q", answers, results)
	}

	_, err = prompt(t, h, s, "r2", "and now?")
	r, ok := sessions.RejectionOf(err)
	if !ok || r.Reason != budget.ReasonTokens {
		t.Fatalf("the next prompt: %v", err)
	}
	want := `budget "per-session": session "` + s.ID() + `" has used 1220 of its 1000 tokens; it does not reset, or raise tokens of limit "per-session" in the budget plugin's config`
	if r.Message != want {
		t.Fatalf("refusal message:\n got %q\nwant %q", r.Message, want)
	}
	// Another session has a budget of its own.
	if _, err := prompt(t, h, open(t, h, "main"), "r3", "hi"); err != nil {
		t.Fatalf("another session: %v", err)
	}
}

const treeConfig = `
plugins:
  - id: parent-model
    use: llm.scripted
    config:
      name: parent
      replies:
        - {tool_calls: [{name: agent, arguments: '{"agent":"helper","prompt":"look it up"}'}], usage: {input_tokens: 100}}
        - {text: parent done, usage: {input_tokens: 100}}
  - id: child-model
    use: llm.scripted
    config:
      name: child
      replies:
        - {tool_calls: [{name: clock}], usage: {input_tokens: 600}}
        - {tool_calls: [{name: clock}], usage: {input_tokens: 600}}
        - {text: child done, usage: {input_tokens: 600}}
  - use: tools.clock
  - use: session.jsonl
    config: {dir: %s}
  - use: tools.agent
    config:
      agents:
        - {name: helper, agent: helper, description: looks things up}
  - use: admission.budget
    config:
      limits:
        - {name: per-user, per: principal, tokens: 1000}
        - {name: per-tenant, per: tenant, concurrent_turns: 1}
agents:
  - id: main
    provider: parent
  - id: helper
    provider: child
`

// TestASubagentTreeSpendsItsParentsBudget: the child's steps are charged
// to the parent's principal; when they spend it, the child's turn stops
// with reason budget, and the parent's turn stops before its next model
// request. The child's task takes no concurrent-turns slot of its own
// (the tenant allows one, which the parent holds).
func TestASubagentTreeSpendsItsParentsBudget(t *testing.T) {
	dir := t.TempDir()
	h := start(t, fmt.Sprintf(treeConfig, dir))
	s := open(t, h, "main")
	res, err := prompt(t, h, s, "r1", "find out")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Ran() || res.End.Reason != sessions.EndBudget || !strings.Contains(res.End.Error, `principal "user:ann" has used 1300 of its 1000 tokens`) {
		t.Fatalf("the parent's turn: %+v", res.End)
	}
	ctx := stdctx.Background()
	evs, err := h.Sessions().History(ctx, s.ID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	answers, result := 0, ""
	for _, e := range evs {
		switch e.Type {
		case session.AssistantMessage:
			answers++
		case session.ToolResult:
			result = e.Message.Content
		}
	}
	if answers != 1 || !strings.Contains(result, "budget/tokens") {
		t.Fatalf("the parent asked the model %d times (want 1, stopped before the second); the agent call answered %q", answers, result)
	}
	list, err := h.Sessions().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var child string
	for _, sum := range list {
		if p, ok := session.ParentOf(sum.ID); ok && p == s.ID() {
			child = sum.ID
		}
	}
	if child == "" {
		t.Fatalf("no child session listed: %+v", list)
	}
	if !strings.Contains(result, `subagent "helper" failed: budget/tokens`) {
		t.Fatalf("the child's failure as the parent saw it: %q", result)
	}
	log, err := os.ReadFile(filepath.Join(dir, child+".jsonl"))
	if err != nil || !strings.Contains(string(log), `"turn":1,"reason":"budget","error":"budget/tokens`) || strings.Count(string(log), `"type":"assistant/message"`) != 2 {
		t.Fatalf("the child's log shows no turn stopped by the budget after two answers (%v):\n%s", err, log)
	}
	// The principal's budget is spent, for every session it opens.
	_, err = prompt(t, h, open(t, h, "main"), "r2", "again")
	if r, ok := sessions.RejectionOf(err); !ok || r.Reason != budget.ReasonTokens || !strings.Contains(r.Message, `principal "user:ann"`) {
		t.Fatalf("another session of ann: %v", err)
	}
}

const concurrentConfig = `
plugins:
  - use: llm.scripted
    config:
      delay: 100ms
      replies:
        - {text: "a slow answer in several chunks of text", usage: {input_tokens: 10}}
  - use: admission.budget
    config:
      hold: 20s
      limits:
        - {name: one-at-a-time, per: principal, concurrent_turns: 1}
agents:
  - id: main
    provider: scripted
`

// TestConcurrentTurnsHoldAndRefuse: a second prompt of a principal with a
// turn running waits until that turn ended, then runs; an unattended one
// is refused at once (unattended_hold 0).
func TestConcurrentTurnsHoldAndRefuse(t *testing.T) {
	h := start(t, concurrentConfig)
	a, b, c := open(t, h, "main"), open(t, h, "main"), open(t, h, "main")
	ctx := stdctx.Background()
	if _, err := a.Prompt(ctx, sessions.PromptRequest{RequestID: "a1", Content: "first", Source: ann}); err != nil {
		t.Fatal(err)
	}
	admitted := make(chan error, 1)
	go func() {
		_, err := b.Prompt(ctx, sessions.PromptRequest{RequestID: "b1", Content: "second", Source: ann})
		admitted <- err
	}()
	// The unattended prompt is refused while a's turn runs.
	hook := ann
	hook.Kind, hook.Entry = agentcontroller.SourceWebhook, "webhook"
	_, err := c.Prompt(ctx, sessions.PromptRequest{RequestID: "c1", Content: "from a hook", Source: hook})
	r, ok := sessions.RejectionOf(err)
	if !ok || r.Reason != budget.ReasonConcurrent ||
		r.Message != `budget "one-at-a-time": principal "user:ann" already has 1 prompts admitted and not done (the limit is 1); send it again once one is done, or raise concurrent_turns of limit "one-at-a-time"` {
		t.Fatalf("the unattended prompt: %v", err)
	}
	select {
	case err := <-admitted:
		t.Fatalf("the second prompt was admitted (%v) while the first's turn ran", err)
	case <-time.After(300 * time.Millisecond):
	}
	first, err := h.Sessions().Wait(ctx, a.ID(), "a1")
	if err != nil || first.End == nil || first.End.Reason != sessions.EndCompleted {
		t.Fatalf("the first turn: %+v %v", first, err)
	}
	select {
	case err := <-admitted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second prompt was still held after the first's turn ended")
	}
	second, err := h.Sessions().Wait(ctx, b.ID(), "b1")
	if err != nil || second.End == nil || second.End.Reason != sessions.EndCompleted {
		t.Fatalf("the second turn: %+v %v", second, err)
	}
	// Both done: the slot is free again.
	if _, err := prompt(t, h, c, "c2", "now"); err != nil {
		t.Fatal(err)
	}
}

// TestCostIsPricedFromTheConfig: the step's usage is priced by the
// config's pricing: key, and a spent cost limit refuses in its currency.
func TestCostIsPricedFromTheConfig(t *testing.T) {
	text := strings.Replace(stopConfig, "{name: per-session, per: session, tokens: 1000}", "{name: daily-spend, per: principal, window: 24h, cost: 0.0005}", 1)
	text = strings.Replace(text, "pricing:\n", "pricing:\n  currency: EUR\n", 1)
	h := start(t, text)
	s := open(t, h, "main")
	res, err := prompt(t, h, s, "r1", "what time is it?")
	if err != nil {
		t.Fatal(err)
	}
	// 600 input tokens at 1 and 10 output at 2 per million: 0.00062.
	if res.End.Reason != sessions.EndBudget || !strings.Contains(res.End.Error, `budget/cost: budget "daily-spend": principal "user:ann" has spent 0.0006 of its 0.0005 EUR in the current 24h0m0s window; it resets at `) {
		t.Fatalf("the turn: %+v", res.End)
	}
	_, err = prompt(t, h, s, "r2", "again")
	if r, ok := sessions.RejectionOf(err); !ok || r.Reason != budget.ReasonCost {
		t.Fatalf("the next prompt: %v", err)
	}
}

// TestAHeldPromptExpires: a prompt held for a slot longer than hold is
// refused as expired, and takes nothing with it.
func TestAHeldPromptExpires(t *testing.T) {
	h := start(t, strings.Replace(concurrentConfig, "hold: 20s", "hold: 200ms", 1))
	a, b := open(t, h, "main"), open(t, h, "main")
	ctx := stdctx.Background()
	if _, err := a.Prompt(ctx, sessions.PromptRequest{RequestID: "a1", Content: "first", Source: ann}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err := b.Prompt(ctx, sessions.PromptRequest{RequestID: "b1", Content: "second", Source: ann})
	r, ok := sessions.RejectionOf(err)
	if !ok || r.Reason != budget.ReasonConcurrent || r.Outcome != sessions.FateExpired || time.Since(began) < 200*time.Millisecond ||
		r.Message != `budget "one-at-a-time": principal "user:ann" already has 1 prompts admitted and not done (the limit is 1), and none was done within 200ms; send it again under a new request id` {
		t.Fatalf("after %s: %+v %v", time.Since(began), r, err)
	}
	if res, err := h.Sessions().Wait(ctx, a.ID(), "a1"); err != nil || res.End.Reason != sessions.EndCompleted {
		t.Fatalf("the first turn: %+v %v", res, err)
	}
	if _, err := prompt(t, h, b, "b2", "now"); err != nil {
		t.Fatalf("once the first turn ended: %v", err)
	}
}
