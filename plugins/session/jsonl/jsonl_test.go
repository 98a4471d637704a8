package jsonl_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/llm/scripted"
	_ "github.com/dsh-go/dsh/plugins/session/jsonl"
	_ "github.com/dsh-go/dsh/plugins/tools/clock"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hostConfig is a config whose agent "main" keeps session s1 in dir;
// persist false leaves the persistence plugin out.
func hostConfig(t *testing.T, dir string, persist bool) *config.Config {
	t.Helper()
	plugin := fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %q}\n", dir)
	if !persist {
		plugin = ""
	}
	yaml := "plugins:\n  - use: llm.scripted\n" + plugin + "agents:\n  - id: main\n    provider: scripted\n    session: s1\n"
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func start(t *testing.T, dir string, persist bool) *host.Host {
	t.Helper()
	h, err := hosttest.Start(hostConfig(t, dir, persist), host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// startFails returns why a host with the session in dir does not start.
func startFails(t *testing.T, dir string, persist bool) error {
	t.Helper()
	h, err := hosttest.Start(hostConfig(t, dir, persist), host.Options{Logger: hclog.NewNullLogger()})
	if err == nil {
		h.Close(stdctx.Background())
		t.Fatal("the host started")
	}
	return err
}

// oneTurn writes a session of one turn and returns its file and lines.
func oneTurn(t *testing.T, dir string) (path string, lines []string) {
	t.Helper()
	h := start(t, dir, true)
	say(t, h, "one")
	h.Close(stdctx.Background())
	path = filepath.Join(dir, "s1.jsonl")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, strings.SplitAfter(strings.TrimSuffix(string(raw), "\n"), "\n")
}

func say(t *testing.T, h *host.Host, text string) {
	t.Helper()
	a, _ := h.Agent("main")
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: text}); err != nil {
		t.Fatal(err)
	}
	a.WhenIdle(stdctx.Background())
}

func userMessages(h *host.Host) []string {
	a, _ := h.Agent("main")
	var out []string
	for _, m := range a.Session().History().Messages() {
		if m.Role == llm.RoleUser {
			out = append(out, m.Content)
		}
	}
	return out
}

func TestAnAgentResumesItsSessionAfterARestart(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, true)
	say(t, h, "first")
	say(t, h, "second")
	a, _ := h.Agent("main")
	written := a.Session().Events(1)
	h.Close(stdctx.Background())

	raw, err := os.ReadFile(filepath.Join(dir, "s1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(raw), "\n"); lines != len(written) {
		t.Fatalf("the file has %d lines for %d events", lines, len(written))
	}

	h = start(t, dir, true)
	defer h.Close(stdctx.Background())
	if got := userMessages(h); strings.Join(got, ",") != "first,second" {
		t.Fatalf("the resumed history holds %v", got)
	}
	say(t, h, "third")
	a, _ = h.Agent("main")
	if a.Session().ID() != "s1" || a.Session().Len() <= len(written) {
		t.Fatalf("the session did not continue: %s with %d events", a.Session().ID(), a.Session().Len())
	}
	for i, e := range a.Session().Events(1) {
		if e.Seq != int64(i)+1 {
			t.Fatalf("event %d has seq %d after the resume", i, e.Seq)
		}
	}
}

// TestASessionNeedsAPersistencePlugin: config check already knows that a
// session: without a store cannot start.
func TestASessionNeedsAPersistencePlugin(t *testing.T) {
	yaml := "plugins:\n  - use: llm.scripted\nagents:\n  - id: main\n    provider: scripted\n    session: s1\n"
	if _, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}}); !errs.HasCode(err, config.Invalid) || !strings.Contains(err.Error(), "use: session.jsonl") {
		t.Fatalf("got %v", err)
	}
}

func TestDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	path, lines := oneTurn(t, dir)

	t.Run("a last line cut short is dropped", func(t *testing.T) {
		// Cut in the middle of the last line: a write that a kill stopped.
		last := lines[len(lines)-1]
		os.WriteFile(path, []byte(strings.Join(lines[:len(lines)-1], "")+last[:len(last)/2]), 0o600)
		h := start(t, dir, true)
		defer h.Close(stdctx.Background())
		a, _ := h.Agent("main")
		// The whole events, and the turn/end the cut took, written again
		// as interrupted.
		evs := a.Session().Events(1)
		if len(evs) != len(lines) || evs[len(evs)-1].Reason != session.ReasonInterrupted {
			t.Fatalf("resumed %d events ending in %+v, want the %d whole ones and turn/end interrupted", len(evs), evs[len(evs)-1], len(lines)-1)
		}
		// What comes next lands on lines of its own: the file resumes
		// again, whole.
		say(t, h, "again")
		n := a.Session().Len()
		h.Close(stdctx.Background())
		h2 := start(t, dir, true)
		defer h2.Close(stdctx.Background())
		a, _ = h2.Agent("main")
		if a.Session().Len() != n {
			t.Fatalf("after the repair the file resumed %d events, want %d", a.Session().Len(), n)
		}
	})
	t.Run("a bad line in the middle is an error that names it", func(t *testing.T) {
		bad := append([]string{}, lines...)
		bad[1] = "{not json\n"
		os.WriteFile(path, []byte(strings.Join(bad, "")), 0o600)
		if err := startFails(t, dir, true); !errs.HasCode(err, session.BadLog) || !strings.Contains(err.Error(), path+":2: not a session event") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a missing event is an error that says where", func(t *testing.T) {
		os.WriteFile(path, []byte(lines[0]+strings.Join(lines[2:], "")), 0o600)
		if err := startFails(t, dir, true); !errs.HasCode(err, session.BadLog) || !strings.Contains(err.Error(), path+":2: event 3 where 2 was expected") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestBadSessionIDsAreConfigErrors(t *testing.T) {
	_, err := config.Parse("test.yaml", []byte("plugins:\n  - use: llm.scripted\nagents:\n  - id: main\n    provider: scripted\n    session: ../etc/passwd\n"), config.LoadOptions{Environ: []string{}})
	if !errs.HasCode(err, config.Invalid) || !strings.Contains(err.Error(), "agents[0].session: session id \"../etc/passwd\" is not a session id: use 1 to 128") {
		t.Fatalf("got %v", err)
	}
	_, err = config.Parse("test.yaml", []byte("plugins:\n  - use: llm.scripted\nagents:\n  - id: a\n    provider: scripted\n    session: s1\n  - id: b\n    provider: scripted\n    session: s1\n"), config.LoadOptions{Environ: []string{}})
	if !errs.HasCode(err, config.Invalid) || !strings.Contains(err.Error(), "agents[1].session: session \"s1\" is also agents[0]'s") {
		t.Fatalf("got %v", err)
	}
}

// TestAFailedWriteIsRetried: events that could not be written at one
// checkpoint stay pending and reach the file at the next one.
func TestAFailedWriteIsRetried(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s1.jsonl")
	h := start(t, dir, true)
	say(t, h, "one")
	// A directory where the file should be: the next checkpoint cannot
	// write.
	os.Rename(path, path+".aside")
	os.Mkdir(path, 0o700)
	say(t, h, "two")
	os.Remove(path)
	os.Rename(path+".aside", path)
	say(t, h, "three")
	a, _ := h.Agent("main")
	n := a.Session().Len()
	h.Close(stdctx.Background())

	h = start(t, dir, true)
	defer h.Close(stdctx.Background())
	a, _ = h.Agent("main")
	if got := userMessages(h); strings.Join(got, ",") != "one,two,three" || a.Session().Len() != n {
		t.Fatalf("resumed %v and %d events, want one,two,three and %d", got, a.Session().Len(), n)
	}
}

// TestManyAgentsWriteAtOnce: sessions flushing at the same time each end up
// whole in their own file.
func TestManyAgentsWriteAtOnce(t *testing.T) {
	dir := t.TempDir()
	yaml := fmt.Sprintf("plugins:\n  - use: llm.scripted\n  - use: session.jsonl\n    config: {dir: %q}\nagents:\n", dir)
	ids := []string{"a1", "a2", "a3", "a4", "a5", "a6"}
	for _, id := range ids {
		yaml += fmt.Sprintf("  - id: %s\n    provider: scripted\n    session: s-%s\n", id, id)
	}
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(turns int) *host.Host {
		h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, _ := h.Agent(id)
				for i := range turns {
					if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: fmt.Sprintf("%s-%d", id, i)}); err != nil {
						t.Error(err)
					}
					a.WhenIdle(stdctx.Background())
				}
			}()
		}
		wg.Wait()
		return h
	}
	h := run(3)
	lens := map[string]int{}
	for _, id := range ids {
		a, _ := h.Agent(id)
		lens[id] = a.Session().Len()
	}
	h.Close(stdctx.Background())
	h = run(0)
	defer h.Close(stdctx.Background())
	for _, id := range ids {
		a, _ := h.Agent(id)
		if a.Session().Len() != lens[id] {
			t.Errorf("%s resumed %d events of %d", id, a.Session().Len(), lens[id])
		}
	}
}

// TestAReloadedAgentKeepsItsConversation: a reload that restarts the agent
// (its config changed) resumes the session it was in.
func TestAReloadedAgentKeepsItsConversation(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, true)
	defer h.Close(stdctx.Background())
	say(t, h, "before")
	changed := hostConfig(t, dir, true)
	changed.Agents[0].SystemPrompt = "Be brief."
	if err := h.Reload(stdctx.Background(), changed); err != nil {
		t.Fatal(err)
	}
	say(t, h, "after")
	if got := userMessages(h); strings.Join(got, ",") != "before,after" {
		t.Fatalf("after the reload the history holds %v", got)
	}
}

// TestResumedHistoryIsTheSame: every kind of event — reasoning, tool calls
// and results, usage, chunks — reads back into the very history the model
// saw before the restart.
func TestResumedHistoryIsTheSame(t *testing.T) {
	dir := t.TempDir()
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - reasoning: "the user wants the time"
          text: "Let me look. "
          tool_calls: [{name: clock, arguments: '{"timezone": "UTC"}'}]
          usage: {input_tokens: 40, output_tokens: 9}
        - text: "It is noon."
          usage: {input_tokens: 60, output_tokens: 4, cache_hit_tokens: 32}
  - use: tools.clock
  - use: session.jsonl
    config: {dir: %q}
agents:
  - id: main
    provider: scripted
    session: s1
`, dir)
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	say(t, h, "what time is it")
	a, _ := h.Agent("main")
	before, events := a.Session().History().Messages(), a.Session().Events(1)
	h.Close(stdctx.Background())

	h, err = hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	a, _ = h.Agent("main")
	if after := a.Session().History().Messages(); !reflect.DeepEqual(before, after) {
		t.Fatalf("history before the restart:\n%+v\nafter:\n%+v", before, after)
	}
	resumed := a.Session().Events(1)
	for i := range events {
		// Times come back in UTC without the monotonic reading.
		if !events[i].Time.Equal(resumed[i].Time) {
			t.Fatalf("event %d: time %v read back as %v", i, events[i].Time, resumed[i].Time)
		}
		events[i].Time, resumed[i].Time = time.Time{}, time.Time{}
	}
	if !reflect.DeepEqual(events, resumed) {
		t.Fatalf("events before the restart:\n%+v\nafter:\n%+v", events, resumed)
	}
}
