package host_test

import (
	stdctx "context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/internal/hosttest"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	_ "github.com/dsh-go/dsh/plugins/all" // the built-ins the configs use
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counterConfig configures the test.counter plugin.
type counterConfig struct {
	Label string `koanf:"label"`
}

// instances records every test.counter instance: what it heard and
// whether it was disposed.
type instance struct {
	label    string
	tag      string
	mu       sync.Mutex
	heard    []string
	disposed bool
}

var (
	instancesMu sync.Mutex
	instances   []*instance
)

func init() {
	plugin.Register("test.counter", "counts admitted messages (tests only)",
		func(ctx *dshctx.Context, cfg counterConfig) error {
			in := &instance{label: cfg.Label, tag: ctx.Tag()}
			instancesMu.Lock()
			instances = append(instances, in)
			instancesMu.Unlock()
			ctx.OnDispose("mark", func() error { in.mu.Lock(); in.disposed = true; in.mu.Unlock(); return nil })
			_, err := agentcontroller.EventAdmission.On(ctx, func(c stdctx.Context, a agentcontroller.Admission, next waterfall.Next[agentcontroller.Admission, agentcontroller.Decision]) (agentcontroller.Decision, error) {
				in.mu.Lock()
				in.heard = append(in.heard, a.Agent.ID()+":"+a.Message.Content)
				in.mu.Unlock()
				return next.Call(c, a)
			})
			return err
		})
}

func resetInstances() {
	instancesMu.Lock()
	instances = nil
	instancesMu.Unlock()
}

func findInstances(label string) []*instance {
	instancesMu.Lock()
	defer instancesMu.Unlock()
	var out []*instance
	for _, in := range instances {
		if in.label == label {
			out = append(out, in)
		}
	}
	return out
}

func start(t *testing.T, yaml string) *host.Host {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	return h
}

func deliver(t *testing.T, h *host.Host, agentID, text string) {
	t.Helper()
	a, ok := h.Agent(agentID)
	if !ok {
		t.Fatalf("no agent %s", agentID)
	}
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: text}); err != nil {
		t.Fatal(err)
	}
	a.WhenIdle(stdctx.Background())
}

const presetConfig = `
plugins:
  - use: llm.scripted
  - id: global
    use: test.counter
    config: {label: global}
presets:
  watched:
    - use: test.counter
      config: {label: preset}
agents:
  - id: a
    provider: scripted
    preset: watched
  - id: b
    provider: scripted
    presets: [watched]
  - id: c
    provider: scripted
`

func TestPresetsAreScopedAndIndependent(t *testing.T) {
	resetInstances()
	h := start(t, presetConfig)
	deliver(t, h, "a", "for a")
	deliver(t, h, "b", "for b")
	deliver(t, h, "c", "for c")
	presets := findInstances("preset")
	if len(presets) != 2 || presets[0] == presets[1] {
		t.Fatalf("want two independent preset instances, got %d", len(presets))
	}
	byTag := map[string]*instance{}
	for _, in := range presets {
		byTag[in.tag] = in
	}
	if !slices.Equal(byTag["a"].heard, []string{"a:for a"}) || !slices.Equal(byTag["b"].heard, []string{"b:for b"}) {
		t.Fatalf("preset listeners heard other agents: a=%v b=%v", byTag["a"].heard, byTag["b"].heard)
	}
	if g := findInstances("global"); len(g) != 1 || len(g[0].heard) != 3 {
		t.Fatalf("root plugin must hear every agent: %v", g[0].heard)
	}
	// Closing an agent's session disposes its preset instances, and only
	// those.
	s, ok := hosttest.Session(h, "a")
	if !ok {
		t.Fatal("agent a has no session")
	}
	if err := s.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if !byTag["a"].disposed || byTag["b"].disposed {
		t.Fatalf("disposed: a=%v b=%v", byTag["a"].disposed, byTag["b"].disposed)
	}
	if _, ok := h.Agent("a"); ok {
		t.Fatal("agent a is still running")
	}
}

func mustParse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const reloadBase = `
plugins:
  - use: llm.scripted
  - id: one
    use: test.counter
    config: {label: one-v1}
  - id: two
    use: test.counter
    config: {label: two}
  - id: three
    use: test.counter
    config: {label: three}
agents:
  - id: main
    provider: scripted
`

func TestReloadRestartsOnlyWhatChanged(t *testing.T) {
	resetInstances()
	h := start(t, reloadBase)
	deliver(t, h, "main", "before")
	twoFiber, _ := h.PluginFiber("two")
	agentBefore, _ := h.Agent("main")

	changed := strings.Replace(reloadBase, "label: one-v1", "label: one-v2", 1)
	changed = strings.Replace(changed, "  - id: three\n    use: test.counter\n    config: {label: three}\n", "", 1)
	if err := h.Reload(stdctx.Background(), mustParse(t, changed)); err != nil {
		t.Fatal(err)
	}
	deliver(t, h, "main", "after")
	one1, one2, two, three := findInstances("one-v1"), findInstances("one-v2"), findInstances("two"), findInstances("three")
	if len(one1) != 1 || !one1[0].disposed || len(one2) != 1 || one2[0].disposed {
		t.Fatal("the changed entry must restart with its new config")
	}
	if len(two) != 1 || two[0].disposed || !slices.Equal(two[0].heard, []string{"main:before", "main:after"}) {
		t.Fatalf("the unchanged entry must keep running with its state: %+v", two[0].heard)
	}
	if f, _ := h.PluginFiber("two"); f != twoFiber {
		t.Fatal("the unchanged entry's fiber was replaced")
	}
	if !three[0].disposed {
		t.Fatal("the removed entry must be disposed")
	}
	if a, _ := h.Agent("main"); a != agentBefore {
		t.Fatal("an unchanged agent was recreated")
	}
}

func TestReloadFailureKeepsTheOldConfig(t *testing.T) {
	resetInstances()
	h := start(t, reloadBase)
	// A session store whose dir cannot be created passes config check but
	// fails in Apply. The changed entry "one" is stopped and restarted
	// before the store fails, so the rollback must bring back its old config.
	text := strings.Replace(reloadBase, "  - id: two\n", "  - id: gate\n    use: session.jsonl\n    config: {dir: /dev/null/sessions}\n  - id: two\n", 1)
	text = strings.Replace(text, "label: one-v1", "label: one-v2", 1)
	cfg, err := config.Parse("bad.yaml", []byte(text), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Reload(stdctx.Background(), cfg)
	if !errs.HasCode(err, host.StartFailed) || !strings.Contains(err.Error(), "previous config keeps running") {
		t.Fatalf("got %v", err)
	}
	if _, ok := h.PluginFiber("gate"); ok {
		t.Fatal("the failed entry is mounted")
	}
	deliver(t, h, "main", "still served")
	if in := findInstances("one-v1"); len(in) != 2 || !in[0].disposed || in[1].disposed || !slices.Contains(in[1].heard, "main:still served") {
		t.Fatal("the old config does not keep serving")
	}
	if in := findInstances("one-v2"); len(in) != 1 || !in[0].disposed {
		t.Fatal("the new config of the changed entry must be gone after the rollback")
	}
}

func TestStartFailureLeavesNothing(t *testing.T) {
	cfg := mustParse(t, `
plugins:
  - use: llm.scripted
agents:
  - id: main
    provider: scripted
`)
	// Parse refuses an unregistered provider; the open still checks for
	// configs built in code.
	cfg.Agents[0].Provider = "deepseek"
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	_, err = hosttest.Open(stdctx.Background(), h, "main")
	if !errs.HasCode(err, host.SpecInvalid) || !strings.Contains(err.Error(), `"deepseek"`) || !strings.Contains(err.Error(), "llm.deepseek") {
		t.Fatalf("got %v", err)
	}
	if len(h.Sessions().Sessions()) != 0 {
		t.Fatal("the failed open left a session")
	}
	assertNothingLeft(t, h, "main")
}

func TestDescribe(t *testing.T) {
	out := host.Describe(mustParse(t, presetConfig))
	wd, _ := os.Getwd()
	for _, want := range []string{"root plugins", "global (use test.counter)", "watched:", "a  provider=scripted presets=watched\n    workspace " + wd + "\n",
		"built-in presets, unused (dsh presets shows them): read-only, workspace-write, full-access"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
}

// TestReloadKeepsAnOpenAgentWhoseTemplateCannotOpen: a reload leaves the
// open agents running even when their template, changed, can no longer
// open; a new session of it then fails and says why.
func TestReloadKeepsAnOpenAgentWhoseTemplateCannotOpen(t *testing.T) {
	h := start(t, reloadBase)
	bad := mustParse(t, reloadBase)
	bad.Agents[0].Provider = "missing" // past Parse, as a config built in code
	if err := h.Reload(stdctx.Background(), bad); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Agent("main"); !ok {
		t.Fatal("the agent is gone")
	}
	deliver(t, h, "main", "still answers")
	_, err := h.Sessions().Open(stdctx.Background(), sessions.OpenOptions{Agent: "main"})
	if !errs.HasCode(err, host.SpecInvalid) || !strings.Contains(err.Error(), `"missing"`) {
		t.Fatalf("got %v", err)
	}
}

// TestReloadedAnnouncesEachReload: holders of an agent learn that the
// config changed, so they can open it again on the new one, also when the
// reload failed; the reload itself leaves their agent alone.
func TestReloadedAnnouncesEachReload(t *testing.T) {
	h := start(t, reloadBase)
	before, _ := h.Agent("main")
	ch := h.Reloaded()
	if err := h.Reload(stdctx.Background(), mustParse(t, strings.Replace(reloadBase, "provider: scripted\n", "provider: scripted\n    model: other\n", 1))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("the reload was not announced")
	}
	if after, _ := h.Agent("main"); after != before {
		t.Fatal("the reload replaced an open agent")
	}
	ch = h.Reloaded()
	// A session store whose dir cannot be created fails in Apply.
	bad := mustParse(t, strings.Replace(reloadBase, "agents:\n", "  - use: session.jsonl\n    config: {dir: /dev/null/sessions}\nagents:\n", 1))
	if err := h.Reload(stdctx.Background(), bad); err == nil {
		t.Fatal("the reload should fail")
	}
	select {
	case <-ch:
	default:
		t.Fatal("a failed reload was not announced")
	}
}
