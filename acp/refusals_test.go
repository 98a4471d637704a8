package acp_test

import (
	stdctx "context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	dshacp "github.com/dsh-go/dsh/acp"
	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// holdRefuse is the state of acptest.hold-refuse: it holds every prompt
// saying "hold" until the test releases it, then refuses it; a prompt held
// again (a retry decided a second time) is counted.
var holdRefuse = struct {
	mu      sync.Mutex
	held    chan struct{}
	release chan struct{}
}{}

func resetHoldRefuse() {
	holdRefuse.mu.Lock()
	holdRefuse.held, holdRefuse.release = make(chan struct{}, 4), make(chan struct{})
	holdRefuse.mu.Unlock()
}

func init() {
	plugin.Register("acptest.hold-refuse", "holds prompts saying hold, then refuses them (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		_, err := agentcontroller.EventAdmission.On(ctx, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			if !strings.Contains(a.Message.Content, "hold") {
				return next.Call(ctx, a)
			}
			holdRefuse.mu.Lock()
			held, release := holdRefuse.held, holdRefuse.release
			holdRefuse.mu.Unlock()
			held <- struct{}{}
			select {
			case <-release:
				return agentcontroller.Reject("acptest/refused", "held, then refused by the test", false), nil
			case <-ctx.Done():
				return agentcontroller.Decision{}, ctx.Err()
			}
		})
		return err
	})
}

// refusalData returns a refused prompt's error data.
func refusalData(t *testing.T, err error) map[string]any {
	t.Helper()
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != dshacp.CodeRefused {
		t.Fatalf("want a refusal, got %v", err)
	}
	d, _ := re.Data.(map[string]any)
	return d
}

// A prompt admission held and then refused answers a refusal naming its
// outcome, and the session log records it as message/refused.
func TestAHeldThenRefusedPromptNamesItsOutcome(t *testing.T) {
	resetHoldRefuse()
	e := newEnv(t, envOpts{extra: "  - use: acptest.hold-refuse\n"})
	id := e.newSession()
	answered := make(chan error, 1)
	go func() { _, err := e.prompt(id, "hold me"); answered <- err }()
	select {
	case <-holdRefuse.held:
	case <-time.After(wait):
		t.Fatal("admission did not hold the prompt")
	}
	close(holdRefuse.release)
	var err error
	select {
	case err = <-answered:
	case <-time.After(wait):
		t.Fatal("the held prompt never answered")
	}
	d := refusalData(t, err)
	if d["reason"] != "acptest/refused" || d["outcome"] != "refused" {
		t.Fatalf("refusal data %v", d)
	}
	ss, _ := e.h.Sessions().Get(string(id))
	waitLog(t, e.h.Sessions(), ss.ID(), "the refusal in the log", func(evs []session.Event) bool {
		for _, ev := range evs {
			if ev.Type == session.MessageRefused && ev.Message.Content == "hold me" && ev.Reason == "acptest/refused" {
				return true
			}
		}
		return false
	})
}

// The answer of a prompt says whether it started its turn (delivered) or
// joined one another prompt started (merged), with the turn.
func TestAPromptAnswerSaysDeliveredOrMerged(t *testing.T) {
	e := newEnv(t, envOpts{mode: "full-access", replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "first"}, {Text: "second"}}})
	id := e.newSession()
	type answer struct {
		r   acp.PromptResponse
		err error
	}
	run := func(text string) chan answer {
		ch := make(chan answer, 1)
		go func() { r, err := e.prompt(id, text); ch <- answer{r, err} }()
		return ch
	}
	first := run("run the gate")
	select {
	case <-gate.started:
	case <-time.After(wait):
		t.Fatal("the tool did not start")
	}
	ss, _ := e.h.Sessions().Get(string(id))
	waitPending := func(n int) {
		deadline := time.Now().Add(wait)
		for pending(t, e.h.Sessions(), ss.ID()) != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d prompts queued; want %d", pending(t, e.h.Sessions(), ss.ID()), n)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	second := run("queued first")
	waitPending(1)
	third := run("queued second")
	waitPending(2)
	openGate()
	for i, c := range []struct {
		ch      chan answer
		outcome sessions.Fate
		turn    int
	}{{first, sessions.FateDelivered, 1}, {second, sessions.FateDelivered, 2}, {third, sessions.FateMerged, 2}} {
		var a answer
		select {
		case a = <-c.ch:
		case <-time.After(wait):
			t.Fatalf("prompt %d never answered", i+1)
		}
		if a.err != nil || a.r.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("prompt %d answered %+v %v", i+1, a.r, a.err)
		}
		o, _ := a.r.Meta[dshacp.MetaOutcome].(map[string]any)
		if o["outcome"] != string(c.outcome) || o["turn"] != float64(c.turn) {
			t.Fatalf("prompt %d: outcome %v; want %s in turn %d", i+1, a.r.Meta, c.outcome, c.turn)
		}
	}
}

// A prompt retried under the same JSON-RPC id is answered with its first
// attempt's recorded refusal or expiry, not decided again.
func TestARetriedPromptAnswersItsRecordedRefusalOrExpiry(t *testing.T) {
	for _, c := range []struct {
		name, extra, text, reason, outcome string
		release                            bool
	}{
		{"refused", "  - use: acptest.hold-refuse\n", "hold me", "acptest/refused", "refused", true},
		{"expired", "  - use: admission.ready-gate\n    config: {timeout: 30ms}\n", "wait for me", "admission/not-ready", "expired", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			resetHoldRefuse()
			if c.release {
				close(holdRefuse.release)
			}
			r := newRawWith(t, c.extra)
			id := r.open(t.TempDir())
			prompt := `{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":"` + id + `","prompt":[{"type":"text","text":"` + c.text + `"}]}}`
			var seq float64
			for attempt := range 2 {
				r.send(prompt)
				m := r.answer(10)
				if errCode(m) != dshacp.CodeRefused {
					t.Fatalf("attempt %d answered %v", attempt+1, m)
				}
				e, _ := m["error"].(map[string]any)
				d, _ := e["data"].(map[string]any)
				if d["reason"] != c.reason || d["outcome"] != c.outcome {
					t.Fatalf("attempt %d: data %v", attempt+1, d)
				}
				if attempt == 0 {
					ss := r.h.Sessions().Sessions()[0]
					evs := waitLog(t, r.h.Sessions(), ss.ID(), "the outcome in the log", func(evs []session.Event) bool {
						for _, ev := range evs {
							if ev.Type == session.MessageRefused || ev.Type == session.MessageExpired {
								return true
							}
						}
						return false
					})
					seq = float64(evs[len(evs)-1].Seq)
					continue
				}
				if d["recorded"] != true || d["seq"] != seq {
					t.Fatalf("the retry was not answered from the record (seq %v): %v", seq, d)
				}
			}
			if len(holdRefuse.held) > 1 {
				t.Fatal("the retry was held and decided again")
			}
		})
	}
}

// waitLog polls the session's log until ok holds and returns it.
func waitLog(t *testing.T, svc sessions.Service, id string, what string, ok func([]session.Event) bool) []session.Event {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		evs := history(t, svc, id)
		if ok(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// open initializes the raw connection and opens a session in dir.
func (r *raw) open(dir string) string {
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	r.answer(1)
	r.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + dir + `","mcpServers":[]}}`)
	res, _ := r.answer(2)["result"].(map[string]any)
	id, _ := res["sessionId"].(string)
	if id == "" {
		r.t.Fatal("session/new answered no session id")
	}
	return id
}

// answer skips notifications up to the answer to JSON-RPC id.
func (r *raw) answer(id float64) map[string]any {
	for {
		if m := r.next(); m["id"] == id {
			return m
		}
	}
}
