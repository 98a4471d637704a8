package budget_test

import (
	stdctx "context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/plugins/budget"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// sharedConfig is a host whose budget counters live in the bucket of
// the NATS servers at url; each model call uses 300 tokens.
const sharedConfig = `
plugins:
  - use: llm.scripted
    config:
      delay: 5ms
      replies:
        - {text: "an answer", usage: {input_tokens: 290, output_tokens: 10}}
  - use: admission.budget
    config:
      store: nats
      nats: {url: %q, replicas: %d}
      limits:
        - {name: hourly-prompts, per: principal, window: 1h, prompts: 10}
        - {name: tokens, per: tenant, tokens: 1000}
agents:
  - id: main
    provider: scripted
`

func as(id, tenant string) agentcontroller.Source {
	return agentcontroller.Source{Kind: agentcontroller.SourceUser, Entry: "serve",
		Principal: agentcontroller.Principal{Kind: "token", ID: id, Tenant: tenant}}
}

// TestAQuotaHoldsAcrossHosts: two hosts on a 3-node JetStream cluster
// share one bucket of counters. Thirty prompts of one principal sent at
// once through both hosts: exactly the ten of its window are admitted.
// Then each host runs one tenant's turns one after the other, both hosts
// at once, until the tenant's 1000 tokens are spent: no step's usage is
// lost, and the overshoot stays within one in-flight turn per host (each
// host's session runs one turn at a time, and a step asks the model only
// while the budget is not spent).
func TestAQuotaHoldsAcrossHosts(t *testing.T) {
	c := natstest.Start(t, 3)
	hosts := []*host.Host{
		start(t, fmt.Sprintf(sharedConfig, c.URL(0), 3)),
		start(t, fmt.Sprintf(sharedConfig, c.URL(1), 3)),
	}
	ctx := stdctx.Background()

	var mu sync.Mutex
	admitted, refused := 0, map[string]int{}
	var wg sync.WaitGroup
	for i := range 30 {
		h := hosts[i%2]
		s := open(t, h, "main")
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "p" + strconv.Itoa(i), Content: "hi", Source: as("ann", "t-prompts")})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				admitted++
				return
			}
			r, _ := sessions.RejectionOf(err)
			refused[r.Reason]++
			if r.Reason != budget.ReasonPrompts {
				t.Log(r.Message)
			}
		}()
	}
	wg.Wait()
	if admitted != 10 || refused[budget.ReasonPrompts] != 20 {
		t.Fatalf("admitted %d, refused %v; want 10 admitted and 20 refused by the prompts budget", admitted, refused)
	}

	// Tokens: one session per host, its turns one after the other, all of
	// tenant acme's (the prompts above were another tenant's).
	steps := make([]int, 2)
	wg = sync.WaitGroup{}
	for i, h := range hosts {
		s := open(t, h, "main")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				res, err := prompt(t, h, s, fmt.Sprintf("t%d-%d", i, n), "go on")
				if err != nil || res.End.Reason != sessions.EndCompleted {
					break
				}
			}
			evs, err := h.Sessions().History(ctx, s.ID(), 0)
			if err != nil {
				t.Error(err)
				return
			}
			for _, e := range evs {
				if e.Type == session.AssistantMessage {
					steps[i]++
				}
			}
		}()
	}
	wg.Wait()
	total := 300 * (steps[0] + steps[1])
	if total < 1000 || total >= 1000+2*300 {
		t.Fatalf("the hosts used %d tokens (%d and %d steps); want at least the budget, 1000, and less than 1000 plus one 300-token step per host", total, steps[0], steps[1])
	}
	// Every step was counted: the refusal names exactly what both used.
	s := open(t, hosts[1], "main")
	_, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "last", Content: "more", Source: as("bob", "acme")})
	r, ok := sessions.RejectionOf(err)
	if !ok || r.Reason != budget.ReasonTokens || !regexp.MustCompile(fmt.Sprintf(`tenant "acme" has used %d of its 1000 tokens`, total)).MatchString(r.Message) {
		t.Fatalf("want a refusal naming %d tokens used: %v", total, err)
	}
	t.Logf("%d + %d steps, %d tokens used of 1000", steps[0], steps[1], total)
}

// TestRestartKeepsCountersInTheBucket: a host started again on the same
// bucket finds the tokens its predecessor used; with the memory store a
// restart starts afresh.
func TestRestartKeepsCountersInTheBucket(t *testing.T) {
	srv := natstest.Single(t)
	shared := fmt.Sprintf(sharedConfig, srv.ClientURL(), 1)
	spend := func(h *host.Host) {
		s := open(t, h, "main")
		for n := range 4 {
			res, err := prompt(t, h, s, "r"+strconv.Itoa(n), "go")
			if err != nil {
				t.Fatalf("prompt %d: %v", n, err)
			}
			if n == 3 && res.End.Reason != sessions.EndBudget {
				t.Fatalf("the fourth turn ended %q, want budget", res.End.Reason)
			}
		}
	}
	spendAndClose := func(text string) {
		h := start(t, text)
		spend(h)
		if err := h.Close(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	refusedAfterRestart := func(text string) error {
		h := start(t, text)
		s := open(t, h, "main")
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		_, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "after", Content: "go", Source: ann})
		return err
	}
	spendAndClose(shared)
	err := refusedAfterRestart(shared)
	if r, ok := sessions.RejectionOf(err); !ok || r.Reason != budget.ReasonTokens || !regexp.MustCompile(`tenant "acme" has used 1200 of its 1000 tokens`).MatchString(r.Message) {
		t.Fatalf("after a restart on the same bucket: %v", err)
	}

	memory := regexp.MustCompile(`(?m)^      store: nats\n      nats: .*\n`).ReplaceAllString(shared, "")
	spendAndClose(memory)
	if err := refusedAfterRestart(memory); err != nil {
		t.Fatalf("the memory store starts afresh after a restart: %v", err)
	}
}

// TestTurnSlotsAcrossHosts: a principal allowed one turn at a time has
// one across hosts: its prompt on the second host waits until the turn
// on the first ended, then runs.
func TestTurnSlotsAcrossHosts(t *testing.T) {
	srv := natstest.Single(t)
	text := strings.Replace(concurrentConfig, "      hold: 20s\n", fmt.Sprintf("      hold: 20s\n      store: nats\n      nats: {url: %q}\n", srv.ClientURL()), 1)
	a, b := start(t, text), start(t, text)
	sa, sb := open(t, a, "main"), open(t, b, "main")
	ctx := stdctx.Background()
	if _, err := sa.Prompt(ctx, sessions.PromptRequest{RequestID: "a1", Content: "first", Source: ann}); err != nil {
		t.Fatal(err)
	}
	admitted := make(chan error, 1)
	go func() {
		_, err := sb.Prompt(ctx, sessions.PromptRequest{RequestID: "b1", Content: "second", Source: ann})
		admitted <- err
	}()
	select {
	case err := <-admitted:
		t.Fatalf("the other host admitted the prompt (%v) while the first host's turn ran", err)
	case <-time.After(300 * time.Millisecond):
	}
	if res, err := a.Sessions().Wait(ctx, sa.ID(), "a1"); err != nil || res.End.Reason != sessions.EndCompleted {
		t.Fatalf("the first turn: %+v %v", res, err)
	}
	select {
	case err := <-admitted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second host still held the prompt after the first host's turn ended")
	}
	if res, err := b.Sessions().Wait(ctx, sb.ID(), "b1"); err != nil || res.End.Reason != sessions.EndCompleted {
		t.Fatalf("the second turn: %+v %v", res, err)
	}
}
