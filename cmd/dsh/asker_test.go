package main

import (
	stdctx "context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/approval"
)

// startInProcess starts a host for cfg text in this process, as dsh run
// does (no configured agent started), and opens the session of the first
// configured agent through its session controller.
func startInProcess(t *testing.T, text string) (*host.Host, *current) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(text), config.LoadOptions{Environ: []string{}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{LogOutput: io.Discard, NoConfigAgents: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	ac, err := pickAgentConfig(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := openSession(stdctx.Background(), h.Sessions(), ac)
	if err != nil {
		t.Fatal(err)
	}
	return h, newCurrent(h.Sessions(), cfg, ac, s)
}

// TestInteractiveAnswersApprovals drives the interactive loop through the
// approval service and the session's live hub, which the terminal attaches
// to as an approving client: the question shows on screen, the typed line
// answers it, a bare n asks for an optional reason, and Ctrl-C denies and
// cancels the turn without leaving the session.
func TestInteractiveAnswersApprovals(t *testing.T) {
	h, sess := startInProcess(t, "plugins:\n  - use: llm.scripted\nagents:\n  - id: main\n    provider: scripted\n")
	svc, err := approval.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	ask := func(ctx stdctx.Context, req approval.Request) (approval.Answer, error) {
		req.AgentID = "main"
		return svc.Ask(ctx, req)
	}

	stdin, typing := io.Pipe()
	scr := &screen{}
	signals := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		done <- interactive(h, sess, stdin, scr, scr, signals, approvalFlags{allow: []string{"read"}}, defaultEcho)
	}()
	// The greeting comes once the terminal is attached as the approver.
	pos := scr.waitFor(t, 0, "> ")

	type result struct {
		ans approval.Answer
		err error
	}
	results := make(chan result, 1)
	askAsync := func(req approval.Request) {
		go func() {
			ans, err := ask(stdctx.Background(), req)
			results <- result{ans, err}
		}()
	}
	get := func() result {
		select {
		case r := <-results:
			return r
		case <-deadline(t):
			t.Fatalf("no answer; the screen shows:\n%s", scr.String())
		}
		return result{}
	}

	// --allow read answers without a question.
	if r := get2(ask, approval.Request{Tool: "read"}); r.Choice != approval.AllowOnce {
		t.Fatalf("--allow read: %+v", r)
	}

	// y: allowed once; a line that is no answer asks again.
	askAsync(bashRm)
	pos = scr.waitFor(t, pos, "? bash wants to run: git status && rm -rf ~")
	io.WriteString(typing, "maybe later\n")
	pos = scr.waitFor(t, pos, "answer y (allow once), a (allow for this session) or n (deny)")
	io.WriteString(typing, "a\n")
	if r := get(); r.ans.Choice != approval.AllowSession {
		t.Fatalf("a: %+v", r)
	}
	pos = scr.waitFor(t, pos, "(allowed for this session)")

	// n, then a reason on its own line.
	askAsync(editReq)
	pos = scr.waitFor(t, pos, "? edit wants to run with")
	io.WriteString(typing, "n\n")
	pos = scr.waitFor(t, pos, "reason for the model (Enter for none)")
	io.WriteString(typing, "keep notes.txt as it is\n")
	if r := get(); r.ans.Choice != approval.Deny || r.ans.Reason != "keep notes.txt as it is" {
		t.Fatalf("n + reason: %+v", r)
	}
	// A bare n and Enter: denied with the default reason.
	askAsync(editReq)
	pos = scr.waitFor(t, pos, "? edit wants to run")
	io.WriteString(typing, "n\n\n")
	if r := get(); r.ans.Choice != approval.Deny || r.ans.Reason != denyReason {
		t.Fatalf("n + Enter: %+v", r)
	}

	// The approval service remembers the "a" above for bash rm: the
	// questions below are about another command.
	bashMv := bashRm
	bashMv.Summary, bashMv.Pattern = "git status && mv a b", "mv"
	// Ctrl-C at a question: denied, turn cancelled, session still open.
	askAsync(bashMv)
	pos = scr.waitFor(t, pos, "? bash wants to run")
	signals <- os.Interrupt
	if r := get(); r.ans.Choice != approval.Deny || !strings.Contains(r.ans.Reason, "interrupted") {
		t.Fatalf("Ctrl-C: %+v", r)
	}
	pos = scr.waitFor(t, pos, "(denied; turn cancelled")
	io.WriteString(typing, "/agents\n")
	pos = scr.waitFor(t, pos, "main  idle")

	// A question withdrawn by its turn leaves the screen ready for lines.
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	go func() { ans, err := ask(ctx, bashMv); results <- result{ans, err} }()
	pos = scr.waitFor(t, pos, "? bash wants to run")
	cancel()
	if r := get(); r.err == nil {
		t.Fatalf("withdrawn: %+v", r)
	}
	pos = scr.waitFor(t, pos, "(the question was withdrawn")

	// Leaving with a question open denies it, then detaches.
	askAsync(bashMv)
	scr.waitFor(t, pos, "? bash wants to run: git status && mv")
	typing.Close()
	if r := get(); r.ans.Choice != approval.Deny {
		t.Fatalf("after the session: %+v", r)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The terminal detached: the agent has no answerer left, and a
	// question fails closed.
	if _, err := ask(stdctx.Background(), bashMv); !errs.HasCode(err, approval.NoAnswerer) {
		t.Fatalf("after the session, a question must fail closed: %v", err)
	}
}

func get2(ask approval.Answerer, req approval.Request) approval.Answer {
	ans, _ := ask(stdctx.Background(), req)
	return ans
}
