package compact_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/session/compact"
	_ "github.com/dsh-go/dsh/plugins/session/jsonl"
	_ "github.com/dsh-go/dsh/plugins/tools/clock"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a host whose agent "main" keeps session s1 in dir, with the
// scripted model (scripted holds its extra config lines) and
// session.compact configured by compactCfg.
func start(t *testing.T, dir, scripted, compactCfg string) *host.Host {
	t.Helper()
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      context_window: 480
      simulate_usage: true
%s
  - use: session.jsonl
    config: {dir: %q}
  - use: tools.clock
  - use: session.compact
    config: {%s}
agents:
  - id: main
    provider: scripted
    session: s1
`, scripted, dir, compactCfg)
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func say(t *testing.T, h *host.Host, text string) {
	t.Helper()
	a, _ := h.Agent("main")
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: text}); err != nil {
		t.Fatal(err)
	}
	if err := a.WhenIdle(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
}

// long is a prompt of about 50 tokens.
func long(i int) string { return fmt.Sprintf("message %d: %s", i, strings.Repeat("lorem ipsum ", 16)) }

func compactions(a agents.Agent) []session.Event {
	var out []session.Event
	for _, e := range a.Session().Events(1) {
		if e.Type == session.Compacted {
			out = append(out, e)
		}
	}
	return out
}

// checkPairs fails unless every tool result of h follows the assistant
// message that made its call, with only other results in between, and
// every call is answered.
func checkPairs(t *testing.T, h llm.History) {
	t.Helper()
	open := map[string]bool{}
	for i, m := range h.All() {
		switch m.Role {
		case llm.RoleTool:
			if !open[m.ToolCallID] {
				t.Fatalf("message %d answers call %q, which no open assistant message made", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		default:
			if len(open) > 0 {
				t.Fatalf("message %d (%s) comes while calls %v are unanswered", i, m.Role, open)
			}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		}
	}
}

func TestCompactsPastTheThresholdAndAResumeUsesTheCompactedHistory(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, "", "")
	for i := range 6 {
		say(t, h, long(i))
	}
	a, _ := h.Agent("main")
	cs := compactions(a)
	if len(cs) == 0 {
		t.Fatal("six turns of 100 tokens in a 480-token window did not compact")
	}
	c := cs[0]
	if c.Message == nil || !strings.HasPrefix(c.Message.Content, compact.SummaryPrefix) || c.Compaction.Summarized == 0 || c.Compaction.Turns == 0 {
		t.Fatalf("the compaction event is %+v / %+v", c.Message, c.Compaction)
	}
	if !strings.Contains(c.Compaction.String(), "compacted ") {
		t.Fatalf("String() = %q", c.Compaction.String())
	}
	live := a.Session().History().Messages()
	if !strings.HasPrefix(live[0].Content, compact.SummaryPrefix) {
		t.Fatalf("the history starts with %q, not the summary", live[0].Content)
	}
	if last := live[len(live)-2]; last.Content != long(5) {
		t.Fatalf("the latest prompt was not kept verbatim: %q", last.Content)
	}
	checkPairs(t, a.Session().History())
	h.Close(stdctx.Background())

	raw, err := os.ReadFile(filepath.Join(dir, "s1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"type":"history/compacted"`) {
		t.Fatal("session.jsonl holds no history/compacted event")
	}

	h = start(t, dir, "", "")
	defer h.Close(stdctx.Background())
	a, _ = h.Agent("main")
	resumed := a.Session().History().Messages()
	if len(resumed) != len(live) {
		t.Fatalf("the resumed history has %d messages, the live one had %d", len(resumed), len(live))
	}
	for i := range live {
		if resumed[i].Content != live[i].Content || resumed[i].Role != live[i].Role {
			t.Fatalf("resumed message %d is %q, was %q", i, resumed[i].Content, live[i].Content)
		}
	}
	say(t, h, "after the resume")
	if got, _ := a.Session().History().Last(); got.Role != llm.RoleAssistant {
		t.Fatalf("the resumed agent did not answer: %+v", got)
	}
}

// TestThePrefixStaysStableBetweenCompactions measures the simulated cache
// hits: between two compactions every request shares all of the previous
// one, and right after a compaction the summary breaks the prefix once.
func TestThePrefixStaysStableBetweenCompactions(t *testing.T) {
	h := start(t, t.TempDir(), "", "threshold: 0.8")
	defer h.Close(stdctx.Background())
	for i := range 12 {
		say(t, h, long(i))
	}
	a, _ := h.Agent("main")
	var prev *llm.Usage
	compacted := false
	hits, misses := 0, 0
	for _, e := range a.Session().Events(1) {
		switch e.Type {
		case session.Compacted:
			compacted = true
		case session.AssistantMessage:
			u := e.Usage
			if prev != nil && !compacted && u.CacheHitTokens < prev.InputTokens {
				t.Fatalf("step at seq %d hit %d cached tokens; the previous request had %d, all of which it shares", e.Seq, u.CacheHitTokens, prev.InputTokens)
			}
			if compacted && u.CacheMissTokens == 0 {
				t.Fatalf("the first request after a compaction hit the whole cache: %+v", u)
			}
			hits += u.CacheHitTokens
			misses += u.CacheMissTokens
			prev, compacted = u, false
		}
	}
	if len(compactions(a)) < 2 {
		t.Fatalf("12 turns compacted %d times", len(compactions(a)))
	}
	t.Logf("cache: %d hit, %d missed tokens", hits, misses)
}

// TestToolCallsAndResultsStayTogether: with every step calling a tool, the
// cut still falls between pairs, live and after Replay.
func TestToolCallsAndResultsStayTogether(t *testing.T) {
	script := `      replies:
        - {text: "checking the time", tool_calls: [{name: clock}, {name: clock}]}
        - {text: "the time is known, and this answer is long enough to count a little"}
        - {text: "summary of everything"}`
	h := start(t, t.TempDir(), script, "keep: 0.3")
	defer h.Close(stdctx.Background())
	for i := range 8 {
		say(t, h, long(i))
	}
	a, _ := h.Agent("main")
	if len(compactions(a)) == 0 {
		t.Fatal("no compaction happened")
	}
	checkPairs(t, a.Session().History())
	replayed, err := session.Replay(a.Session().Events(1))
	if err != nil {
		t.Fatal(err)
	}
	checkPairs(t, replayed)
	if replayed.Len() != a.Session().History().Len() {
		t.Fatalf("replay derived %d messages, the live history has %d", replayed.Len(), a.Session().History().Len())
	}
}

func TestAManualRequestCompactsAtTheNextRequest(t *testing.T) {
	h := start(t, t.TempDir(), "", "window: 100000")
	defer h.Close(stdctx.Background())
	say(t, h, "one")
	say(t, h, "two")
	a, _ := h.Agent("main")
	if len(compactions(a)) != 0 {
		t.Fatal("compacted far below the threshold")
	}
	svc, err := compact.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	svc.Request("main")
	say(t, h, "three")
	cs := compactions(a)
	if len(cs) != 1 || !cs[0].Compaction.Manual {
		t.Fatalf("got %d compactions: %+v", len(cs), cs)
	}
	if got := a.Session().History().Messages(); len(got) != 3 || got[1].Content != "three" {
		t.Fatalf("the compacted history is %+v", got)
	}
}

func TestAnAbortDuringTheSummaryStopsTheTurnAndRecordsNothing(t *testing.T) {
	h := start(t, t.TempDir(), "      delay: 20ms", "window: 100000")
	defer h.Close(stdctx.Background())
	say(t, h, "one")
	a, _ := h.Agent("main")
	before := a.Session().History().Len()

	var once sync.Once
	started := make(chan struct{})
	if _, err := compact.EventStarted.On(h.Root(), func(stdctx.Context, compact.Started) error {
		once.Do(func() { close(started) })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan compact.Done, 1)
	if _, err := compact.EventDone.On(h.Root(), func(_ stdctx.Context, d compact.Done) error {
		done <- d
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	svc, _ := compact.Key.Get(h.Root())
	svc.Request("main")
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: "two"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the compaction never started")
	}
	a.Abort()
	if err := a.WhenIdle(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if d := <-done; d.Err == nil {
		t.Fatal("compact/done reported no error for an aborted summary")
	}
	if len(compactions(a)) != 0 {
		t.Fatal("an aborted summary was recorded")
	}
	evs := a.Session().Events(1)
	if end := evs[len(evs)-1]; end.Type != session.TurnEnd || end.Reason != "aborted" {
		t.Fatalf("the turn ended with %+v", end)
	}
	if got := a.Session().History().Len(); got != before+1 {
		t.Fatalf("the history has %d messages; want the %d before and the new prompt", got, before)
	}
}

func TestAFailedSummaryIsReportedAndTheRequestGoesOn(t *testing.T) {
	script := `      replies:
        - {text: "ok"}
        - {finish: error, error: "overloaded"}`
	h := start(t, t.TempDir(), script, "window: 100000")
	defer h.Close(stdctx.Background())
	say(t, h, "one")
	reported := make(chan error, 4)
	if _, err := agents.EventError.On(h.Root(), func(_ stdctx.Context, r agents.ErrorReport) error {
		reported <- r.Err
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	svc, _ := compact.Key.Get(h.Root())
	svc.Request("main")
	say(t, h, "two")
	a, _ := h.Agent("main")
	if len(compactions(a)) != 0 {
		t.Fatal("a failed summary was recorded")
	}
	select {
	case err := <-reported:
		if !errs.HasCode(err, compact.Failed) || !strings.Contains(err.Error(), "overloaded") {
			t.Fatalf("reported %v", err)
		}
	default:
		t.Fatal("the failure was not reported on agent/error")
	}
	if last, _ := a.Session().History().Last(); last.Content != "ok" {
		t.Fatalf("the turn did not go on: %+v", last)
	}
}

// TestALargeSystemPromptDoesNotCompactEveryStep: when the prompt is over
// the threshold because of what compaction cannot shrink, it does not
// summarize a few small messages at every request.
func TestALargeSystemPromptDoesNotCompactEveryStep(t *testing.T) {
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
    config: {simulate_usage: true}
  - use: session.compact
    config: {window: 400}
agents:
  - id: main
    provider: scripted
    system_prompt: %q
`, strings.Repeat("rules ", 250))
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	for _, p := range []string{"a", "b", "c", "d"} {
		say(t, h, p)
	}
	a, _ := h.Agent("main")
	if n := len(compactions(a)); n != 0 {
		t.Fatalf("a 375-token system prompt in a 400-token window made %d compactions of tiny turns", n)
	}
	if last, _ := a.Session().History().Last(); last.Content != "You said: d" {
		t.Fatalf("the agent stopped answering: %+v", last)
	}
}

// TestAHistoryFarPastTheWindowTakesSeveralRounds: resumed into a smaller
// window, a history too large for one summary request is summarized in
// rounds, each request fitting in the window.
func TestAHistoryFarPastTheWindowTakesSeveralRounds(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, "", "window: 100000")
	for i := range 8 {
		say(t, h, long(i))
	}
	h.Close(stdctx.Background())

	h = start(t, dir, "", "window: 480")
	defer h.Close(stdctx.Background())
	var mu sync.Mutex
	var sizes []int
	if _, err := compact.EventStarted.On(h.Root(), func(_ stdctx.Context, s compact.Started) error {
		mu.Lock()
		sizes = append(sizes, s.Messages)
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	say(t, h, "now")
	a, _ := h.Agent("main")
	cs := compactions(a)
	if len(cs) < 2 {
		t.Fatalf("a 900-token history in a 480-token window compacted in %d rounds", len(cs))
	}
	for _, c := range cs {
		if c.Turn != cs[0].Turn {
			t.Fatal("the rounds spread over several turns")
		}
	}
	checkPairs(t, a.Session().History())
	if last, _ := a.Session().History().Last(); last.Content != "You said: now" {
		t.Fatalf("the agent did not answer: %+v", last)
	}
	t.Logf("rounds summarized %v messages", sizes)
}
