package replay_test

import (
	stdctx "context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/replay"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// askYAML: the model calls the clock once per turn; the rule on it
// decides as given.
func askYAML(decision string) string {
	return fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - {text: "checking", tool_calls: [{name: clock, arguments: '{"timezone": "UTC"}'}]}
        - {text: done}
  - use: tools.clock
  - use: tools.permission
    config: {rules: [{tool: clock, decision: %s, reason: "clock rule"}]}
agents:
  - id: main
    provider: scripted
`, decision)
}

func parse(t *testing.T, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("replay.yaml", []byte(text), config.LoadOptions{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func askConfig(t *testing.T, decision string) *config.Config { return parse(t, askYAML(decision)) }

func start(t *testing.T, cfg *config.Config) *host.Host {
	t.Helper()
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return h
}

// recordAsked records a session of three turns: a person answers the
// first clock Ask allow-once and the second deny; the third prompt comes
// from a webhook, whose Ask nobody is asked about.
func recordAsked(t *testing.T) replay.Recording {
	t.Helper()
	ctx := stdctx.Background()
	h := start(t, askConfig(t, "ask"))
	svc := h.Sessions()
	if _, err := svc.Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "rec", KeepRunning: true}}); err != nil {
		t.Fatal(err)
	}
	st, err := svc.Attach(ctx, "rec", sessions.AttachOptions{Approvals: true, Name: "person"})
	if err != nil {
		t.Fatal(err)
	}
	answers := make(chan approval.Choice, 2)
	answers <- approval.AllowOnce
	answers <- approval.Deny
	reading, stop := stdctx.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			u, err := st.Next(reading)
			if err != nil {
				return
			}
			if u.Question != nil {
				_ = st.Answer(u.Question.ID, approval.Answer{Choice: <-answers, Reason: "person says"})
			}
		}
	}()
	defer func() { stop(); st.Close(); <-done }()
	hook := sessions.Source{Kind: sessions.SourceWebhook, Entry: "webhook", Principal: sessions.Principal{Kind: "webhook", ID: "ci"}}
	for i, p := range []sessions.PromptRequest{{RequestID: "p1", Content: "one"}, {RequestID: "p2", Content: "two"}, {RequestID: "p3", Content: "three", Source: hook}} {
		turn, err := svc.Prompt(ctx, "rec", p)
		if err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
		if _, err := turn.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	events, err := svc.History(ctx, "rec", 0)
	if err != nil {
		t.Fatal(err)
	}
	var answered []string
	for _, e := range events {
		if e.Type == session.DecisionRecorded && e.Decision.Stage == session.StageAnswer {
			answered = append(answered, e.Decision.Verdict+"/"+e.Decision.Policy)
		}
	}
	if strings.Join(answered, " ") != "allow-once/person deny/person deny/nobody" {
		t.Fatalf("recorded answers: %v", answered)
	}
	return replay.Recording{Session: "rec", Agent: "main", Events: events}
}

func replayUnder(t *testing.T, cfg *config.Config, rec replay.Recording) replay.Report {
	t.Helper()
	h := start(t, replay.Config(cfg))
	r, err := replay.New(h)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Replay(stdctx.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestAsksAreAnsweredAsRecorded: replayed under the recording's own
// config, each Ask gets the recorded answer — the person's allow and
// deny, the webhook's refusal — so nothing changes; with the rule made
// allow, exactly the three approvals change, ASK→ALLOW, relaxed; with
// the rule made deny, they tighten.
func TestAsksAreAnsweredAsRecorded(t *testing.T) {
	rec := recordAsked(t)
	if rep := replayUnder(t, askConfig(t, "ask"), rec); rep.Changed() || rep.Decisions != 6 || rep.Steps != 6 {
		t.Fatalf("replay under the recorded config: %+v", rep)
	}
	for _, c := range []struct{ decision, kind string }{{"allow", replay.Relaxed}, {"deny", replay.Tightened}} {
		rep := replayUnder(t, askConfig(t, c.decision), rec)
		var got []string
		for _, ch := range rep.Changes {
			got = append(got, fmt.Sprintf("%s %s t%d s%d %s %s->%s", ch.Kind, ch.Stage, ch.Turn, ch.Step, ch.Tool, ch.Before.Verdict, ch.After.Verdict))
		}
		var want []string
		for turn := 1; turn <= 3; turn++ {
			want = append(want, fmt.Sprintf("%s approval t%d s1 clock ask->%s", c.kind, turn, c.decision))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") || len(rep.Turns) != 0 {
			t.Fatalf("rule %s:\n got %s\nwant %s\nturns %+v", c.decision, strings.Join(got, "\n"), strings.Join(want, "\n"), rep.Turns)
		}
	}
}

// TestWhatIsLetThroughNowComesFirst: a prompt a rate limit refused, and
// a clock call allowed, are replayed without the limit and with the
// clock denied: the refusal that became an admission is listed first,
// though it came later, then the approval that tightened; the turn the
// admitted prompt now runs has no recording and is not a changed turn.
func TestWhatIsLetThroughNowComesFirst(t *testing.T) {
	ctx := stdctx.Background()
	cfg := parse(t, strings.Replace(askYAML("allow"), "plugins:\n", "plugins:\n  - use: admission.rate-limit\n    config: {per_minute: 1}\n", 1))
	h := start(t, cfg)
	svc := h.Sessions()
	if _, err := svc.Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "lim", KeepRunning: true}}); err != nil {
		t.Fatal(err)
	}
	turn, err := svc.Prompt(ctx, "lim", sessions.PromptRequest{RequestID: "q1", Content: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Prompt(ctx, "lim", sessions.PromptRequest{RequestID: "q2", Content: "two"}); err == nil {
		t.Fatal("the rate limit let the second prompt through")
	}
	if err := svc.Idle(ctx, "lim"); err != nil {
		t.Fatal(err)
	}
	events, err := svc.History(ctx, "lim", 0)
	if err != nil {
		t.Fatal(err)
	}
	rep := replayUnder(t, askConfig(t, "deny"), replay.Recording{Session: "lim", Agent: "main", Events: events})
	var got []string
	for _, c := range rep.Changes {
		got = append(got, fmt.Sprintf("%s %s %s%s %s->%s", c.Kind, c.Stage, c.RequestID, c.Tool, c.Before.Verdict, c.After.Verdict))
	}
	want := "relaxed admission q2 refuse->admit\ntightened approval clock allow->deny"
	if strings.Join(got, "\n") != want || len(rep.Turns) != 0 {
		t.Fatalf("changes\n got %s\nwant %s\nturns %+v", strings.Join(got, "\n"), want, rep.Turns)
	}
}

// TestABudgetCountsInMemoryDuringAReplay: a budget whose counters live in
// a shared bucket counts in memory during a replay, so the replay neither
// spends the real quota nor needs its servers: here the bucket's server
// cannot be reached at all, and the replay still decides as recorded.
func TestABudgetCountsInMemoryDuringAReplay(t *testing.T) {
	rec := recordAsked(t)
	cfg := parse(t, strings.Replace(askYAML("ask"), "agents:", `  - use: admission.budget
    config:
      store: nats
      nats: {url: "nats://127.0.0.1:1"}
      limits: [{name: day, per: session, tokens: 1000000}]
agents:`, 1))
	if rep := replayUnder(t, cfg, rec); rep.Changed() || rep.Decisions != 6 {
		t.Fatalf("replay with a budget on an unreachable bucket: %+v", rep)
	}
}

// TestARefusalRecordedMidTurnReplays: a prompt the rate limit refused
// while a turn waited for its Ask is recorded in the middle of that turn
// (the refusal is durable before its sender hears). Replayed under the
// recording's config nothing changes; without the limit the refusal
// becomes an admission, the one change.
func TestARefusalRecordedMidTurnReplays(t *testing.T) {
	ctx := stdctx.Background()
	limited := strings.Replace(askYAML("ask"), "plugins:\n", "plugins:\n  - use: admission.rate-limit\n    config: {per_minute: 1}\n", 1)
	h := start(t, parse(t, limited))
	svc := h.Sessions()
	if _, err := svc.Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "mid", KeepRunning: true}}); err != nil {
		t.Fatal(err)
	}
	st, err := svc.Attach(ctx, "mid", sessions.AttachOptions{Approvals: true, Name: "person"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	turn, err := svc.Prompt(ctx, "mid", sessions.PromptRequest{RequestID: "q1", Content: "one"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		u, err := st.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if u.Question == nil {
			continue
		}
		// The turn waits for this answer: the second prompt comes now.
		if _, err := svc.Prompt(ctx, "mid", sessions.PromptRequest{RequestID: "q2", Content: "two"}); err == nil {
			t.Fatal("the rate limit let the second prompt through")
		}
		if err := st.Answer(u.Question.ID, approval.Answer{Choice: approval.AllowOnce, Reason: "person says"}); err != nil {
			t.Fatal(err)
		}
		break
	}
	if _, err := turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	events, err := svc.History(ctx, "mid", 0)
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	for _, e := range events {
		if e.Type == session.TurnStart || e.Type == session.TurnEnd || e.Type == session.MessageRefused {
			at = append(at, string(e.Type))
		}
	}
	if strings.Join(at, " ") != "turn/start message/refused turn/end" {
		t.Fatalf("the refusal is not inside the turn: %v", at)
	}
	rec := replay.Recording{Session: "mid", Agent: "main", Events: events}
	if rep := replayUnder(t, parse(t, limited), rec); rep.Changed() {
		t.Fatalf("replay under the recorded config: %+v", rep)
	}
	rep := replayUnder(t, askConfig(t, "ask"), rec)
	var got []string
	for _, c := range rep.Changes {
		got = append(got, fmt.Sprintf("%s %s %s %s->%s", c.Kind, c.Stage, c.RequestID, c.Before.Verdict, c.After.Verdict))
	}
	if want := "relaxed admission q2 refuse->admit"; strings.Join(got, "\n") != want {
		t.Fatalf("without the limit\n got %s\nwant %s", strings.Join(got, "\n"), want)
	}
}
