package agentsmd_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/prompt/agentsmd"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	t        testing.TB
	root     *dshctx.Context
	registry *agents.Registry
	prompt   *systemprompt.Service

	mu      sync.Mutex
	systems []string // the system prompt of each request, in order
	logs    strings.Builder
}

func (e *env) Write(b []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.Write(b)
}

func (e *env) logged() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.String()
}

// newEnv mounts the core services, an echoing scripted model, the loop
// and, unless cfg is nil, the plugin.
func newEnv(t testing.TB, cfg *agentsmd.Config) *env {
	t.Helper()
	e := &env{t: t}
	root := dshctx.New(dshctx.WithLogger(hclog.New(&hclog.LoggerOptions{Output: e, Level: hclog.Info})))
	ctxtest.Cleanup(t, root)
	e.root = root
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		p   dshctx.Plugin
		cfg any
	}{{scripted.Plugin, scripted.Config{}}, {agentloop.Plugin, agentloop.Config{}}} {
		f, _ := root.Plugin(p.p, p.cfg)
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	e.registry, _ = agents.Key.Get(root)
	e.prompt, _ = systemprompt.Key.Get(root)
	agentloop.EventRequest.On(root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		e.mu.Lock()
		e.systems = append(e.systems, ev.Request.System)
		e.mu.Unlock()
		return next.Call(ctx, ev)
	})
	if cfg != nil {
		e.apply(*cfg)
	}
	return e
}

func (e *env) apply(cfg agentsmd.Config) *dshctx.Fiber {
	e.t.Helper()
	f, _ := e.root.Plugin(agentsmd.Plugin, cfg)
	if err := f.Await(stdctx.Background()); err != nil {
		e.t.Fatal(err)
	}
	return f
}

func (e *env) create(id, ws string) agents.Agent {
	e.t.Helper()
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: id, Options: agents.Options{
		Provider: "scripted", Workspace: ws, SystemPrompt: "You are a test agent."}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { h.Dispose(stdctx.Background()) })
	return h.Agent
}

// turn runs one turn and returns the system prompt its request carried.
func (e *env) turn(a agents.Agent) string {
	e.t.Helper()
	if err := a.Followup(llm.Message{Role: llm.RoleUser, Content: "hi"}); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	// The driver may not have started yet: wait for the request.
	for {
		e.mu.Lock()
		n := len(e.systems)
		e.mu.Unlock()
		if n > 0 {
			break
		}
		select {
		case <-ctx.Done():
			e.t.Fatal("no request")
		case <-time.After(time.Millisecond):
		}
	}
	if err := a.WhenIdle(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.systems[len(e.systems)-1]
	e.systems = nil
	return s
}

func defaults() *agentsmd.Config {
	c := agentsmd.Config{}.Defaults()
	return &c
}

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// repo makes a repository root/.git with root/AGENTS.md and
// root/pkg/sub/AGENTS.md, and returns root and the workspace root/pkg/sub.
func repo(t testing.TB) (string, string) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "AGENTS.md"), "root rules\n")
	write(t, filepath.Join(root, "pkg", "sub", "AGENTS.md"), "sub rules\n")
	return root, filepath.Join(root, "pkg", "sub")
}

func TestRootFirstNearestLastWithLabels(t *testing.T) {
	root, ws := repo(t)
	write(t, filepath.Join(root, "pkg", "AGENTS.md"), "pkg rules\n")
	e := newEnv(t, defaults())
	sys := e.turn(e.create("a", ws))
	want := "You are a test agent.\n\n# Project instructions\n\n" +
		"The files below hold instructions for this project, from the project root down to the workspace (pkg/sub/). " +
		"Follow them; where two disagree, the later file, nearer the workspace, wins." +
		"\n\n## AGENTS.md\n\nroot rules\n\n## pkg/AGENTS.md\n\npkg rules\n\n## pkg/sub/AGENTS.md\n\nsub rules"
	if sys != want {
		t.Fatalf("system prompt\n got %q\nwant %q", sys, want)
	}
}

func TestNoFileNoSection(t *testing.T) {
	e := newEnv(t, defaults())
	a := e.create("a", t.TempDir())
	if sys := e.turn(a); sys != "You are a test agent." {
		t.Fatalf("a workspace without AGENTS.md must add nothing: %q", sys)
	}
	// Empty and blank files say nothing either.
	ws := t.TempDir()
	write(t, filepath.Join(ws, "AGENTS.md"), " \n\n")
	if sys := e.turn(e.create("b", ws)); sys != "You are a test agent." {
		t.Fatalf("a blank AGENTS.md must add nothing: %q", sys)
	}
}

// TestNoRepositoryReadsOnlyTheWorkspace: without a .git above, the
// directories above the workspace are not read.
func TestNoRepositoryReadsOnlyTheWorkspace(t *testing.T) {
	parent := t.TempDir()
	write(t, filepath.Join(parent, "AGENTS.md"), "parent rules\n")
	ws := filepath.Join(parent, "ws")
	write(t, filepath.Join(ws, "AGENTS.md"), "ws rules\n")
	e := newEnv(t, defaults())
	sys := e.turn(e.create("a", ws))
	if strings.Contains(sys, "parent rules") || !strings.Contains(sys, "## AGENTS.md\n\nws rules") {
		t.Fatalf("got %q", sys)
	}
}

// TestNamesInOrderOfPreference: a directory gives the first name that
// exists, so a fallback name fills in where AGENTS.md is missing.
func TestNamesInOrderOfPreference(t *testing.T) {
	root, ws := repo(t)
	write(t, filepath.Join(root, "CLAUDE.md"), "claude root\n")
	write(t, filepath.Join(ws, "CLAUDE.md"), "claude sub\n")
	write(t, filepath.Join(root, "pkg", "CLAUDE.md"), "claude pkg\n")
	cfg := defaults()
	cfg.Names = []string{"AGENTS.md", "CLAUDE.md"}
	e := newEnv(t, cfg)
	sys := e.turn(e.create("a", ws))
	if !strings.Contains(sys, "## AGENTS.md\n\nroot rules\n\n## pkg/CLAUDE.md\n\nclaude pkg\n\n## pkg/sub/AGENTS.md\n\nsub rules") ||
		strings.Contains(sys, "claude root") || strings.Contains(sys, "claude sub") {
		t.Fatalf("got %q", sys)
	}
}

func TestCapsCutWithANoteNearestFirst(t *testing.T) {
	root, ws := repo(t)
	write(t, filepath.Join(root, "AGENTS.md"), strings.Repeat("r", 100))
	write(t, filepath.Join(ws, "AGENTS.md"), strings.Repeat("s", 50))
	cfg := defaults()
	cfg.MaxFileBytes, cfg.MaxBytes = 40, 70
	e := newEnv(t, cfg)
	sys := e.turn(e.create("a", ws))
	// The nearest file takes its 40 first; the root gets the 30 left.
	for _, want := range []string{
		"## AGENTS.md\n\n" + strings.Repeat("r", 30) + "\n\n[dsh: AGENTS.md cut to 30 of its 100 bytes by the max_bytes cap; the rest is not shown]",
		"## pkg/sub/AGENTS.md\n\n" + strings.Repeat("s", 40) + "\n\n[dsh: pkg/sub/AGENTS.md cut to 40 of its 50 bytes by the max_file_bytes cap; the rest is not shown]",
	} {
		if !strings.Contains(sys, want) {
			t.Fatalf("missing %q in\n%s", want, sys)
		}
	}
	// Nothing left: the file is named with its note and no text.
	cfg.MaxBytes = 40
	e2 := newEnv(t, cfg)
	sys = e2.turn(e2.create("b", ws))
	if !strings.Contains(sys, "## AGENTS.md\n\n[dsh: AGENTS.md cut to 0 of its 100 bytes by the max_bytes cap") {
		t.Fatalf("got %q", sys)
	}
}

func TestCutKeepsWholeCharactersAndLines(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, "AGENTS.md"), strings.Repeat("é", 10)) // 20 bytes
	cfg := defaults()
	cfg.MaxFileBytes = 7
	e := newEnv(t, cfg)
	if sys := e.turn(e.create("a", ws)); !strings.Contains(sys, "## AGENTS.md\n\nééé\n\n[dsh: AGENTS.md cut to 6 of its 20 bytes") {
		t.Fatalf("got %q", sys)
	}
	ws2 := t.TempDir()
	write(t, filepath.Join(ws2, "AGENTS.md"), "line one\nline two\nline three\n")
	cfg.MaxFileBytes = 20
	e2 := newEnv(t, cfg)
	if sys := e2.turn(e2.create("b", ws2)); !strings.Contains(sys, "## AGENTS.md\n\nline one\nline two\n\n[dsh: AGENTS.md cut to 18 of its 29 bytes") {
		t.Fatalf("got %q", sys)
	}
}

func TestChangePickedUpAtTheNextTurn(t *testing.T) {
	root, ws := repo(t)
	e := newEnv(t, defaults())
	a := e.create("a", ws)
	if sys := e.turn(a); !strings.Contains(sys, "sub rules") {
		t.Fatalf("got %q", sys)
	}
	// Edit (a different size, so a coarse mtime cannot hide it), add a
	// file between, and remove one.
	write(t, filepath.Join(ws, "AGENTS.md"), "sub rules, edited\n")
	write(t, filepath.Join(root, "pkg", "AGENTS.md"), "pkg rules\n")
	if err := os.Remove(filepath.Join(root, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	sys := e.turn(a)
	if !strings.HasSuffix(sys, "## pkg/AGENTS.md\n\npkg rules\n\n## pkg/sub/AGENTS.md\n\nsub rules, edited") || strings.Contains(sys, "root rules") {
		t.Fatalf("the change did not reach the next turn: %q", sys)
	}
	if n := strings.Count(e.prompt.Render(a.Context()), "# Project instructions"); n != 1 {
		t.Fatalf("the section must be replaced, not added: %d copies", n)
	}
	// Every file gone: the section goes too.
	os.Remove(filepath.Join(root, "pkg", "AGENTS.md"))
	os.Remove(filepath.Join(ws, "AGENTS.md"))
	if sys := e.turn(a); sys != "You are a test agent." {
		t.Fatalf("got %q", sys)
	}
	// And comes back.
	write(t, filepath.Join(ws, "AGENTS.md"), "back\n")
	if sys := e.turn(a); !strings.HasSuffix(sys, "## pkg/sub/AGENTS.md\n\nback") {
		t.Fatalf("got %q", sys)
	}
}

func TestReloadOffReadsOnce(t *testing.T) {
	_, ws := repo(t)
	cfg := defaults()
	cfg.Reload = false
	e := newEnv(t, cfg)
	a := e.create("a", ws)
	e.turn(a)
	write(t, filepath.Join(ws, "AGENTS.md"), "sub rules, edited\n")
	if sys := e.turn(a); strings.Contains(sys, "edited") {
		t.Fatalf("reload off must read once: %q", sys)
	}
}

// TestSymlinkOutsideIsNotRead: a symlink to a file outside the project is
// refused and logged; one inside is followed.
func TestSymlinkOutsideIsNotRead(t *testing.T) {
	root, ws := repo(t)
	secret := filepath.Join(t.TempDir(), "secret.md")
	write(t, secret, "SECRET\n")
	os.Remove(filepath.Join(ws, "AGENTS.md"))
	if err := os.Symlink(secret, filepath.Join(ws, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	// A relative link that climbs out is refused as well.
	rel, _ := filepath.Rel(filepath.Join(root, "pkg"), secret)
	if err := os.Symlink(rel, filepath.Join(root, "pkg", "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, defaults())
	sys := e.turn(e.create("a", ws))
	if strings.Contains(sys, "SECRET") || !strings.Contains(sys, "root rules") {
		t.Fatalf("got %q", sys)
	}
	if n := strings.Count(e.logged(), "code=AGENTSMD_OUTSIDE"); n != 2 {
		t.Fatalf("each refused link must be logged once: %d in\n%s", n, e.logged())
	}

	// Inside the project, a link is followed.
	write(t, filepath.Join(root, "docs", "rules.md"), "shared rules\n")
	ws2 := filepath.Join(root, "other")
	if err := os.MkdirAll(ws2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../docs/rules.md", filepath.Join(ws2, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	if sys := e.turn(e.create("b", ws2)); !strings.Contains(sys, "## other/AGENTS.md\n\nshared rules") {
		t.Fatalf("got %q", sys)
	}
}

// TestWorkspaceThroughASymlink: a workspace named through a symlink is
// laid out from its real path, so its repository is found.
func TestWorkspaceThroughASymlink(t *testing.T) {
	_, ws := repo(t)
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, defaults())
	sys := e.turn(e.create("a", link))
	if !strings.Contains(sys, "root rules") || !strings.Contains(sys, "## pkg/sub/AGENTS.md") {
		t.Fatalf("got %q", sys)
	}
}

func TestBinaryAndUnreadableAreSkipped(t *testing.T) {
	root, ws := repo(t)
	write(t, filepath.Join(root, "AGENTS.md"), "bin\x00ary")
	write(t, filepath.Join(root, "pkg", "AGENTS.md"), "\xff\xfe not utf-8")
	e := newEnv(t, defaults())
	a := e.create("a", ws)
	sys := e.turn(a)
	if strings.Contains(sys, "ary") || strings.Contains(sys, "utf-8") || !strings.HasSuffix(sys, "## pkg/sub/AGENTS.md\n\nsub rules") {
		t.Fatalf("got %q", sys)
	}
	if n := strings.Count(e.logged(), "code=AGENTSMD_BINARY"); n != 2 {
		t.Fatalf("each skipped file must be logged: %d in\n%s", n, e.logged())
	}
	// A directory under the name is no file.
	ws2 := filepath.Join(root, "dir")
	if err := os.MkdirAll(filepath.Join(ws2, "AGENTS.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	if sys := e.turn(e.create("b", ws2)); strings.Contains(sys, "dir/AGENTS.md") || !strings.Contains(e.logged(), "AGENTSMD_UNREADABLE") {
		t.Fatalf("got %q\n%s", sys, e.logged())
	}
	if os.Geteuid() == 0 {
		return // root reads files whatever their mode
	}
	if err := os.Chmod(filepath.Join(ws, "AGENTS.md"), 0); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "AGENTS.md"), "root rules\n")
	if sys := e.turn(a); !strings.HasSuffix(sys, "## AGENTS.md\n\nroot rules") {
		t.Fatalf("got %q", sys)
	}
}

// TestAppliedAfterTheAgent: a plugin added by a reload picks up the agents
// that run already, and its unload takes its section away.
func TestAppliedAfterTheAgent(t *testing.T) {
	_, ws := repo(t)
	e := newEnv(t, nil)
	a := e.create("a", ws)
	if sys := e.turn(a); sys != "You are a test agent." {
		t.Fatalf("got %q", sys)
	}
	f := e.apply(*defaults())
	if sys := e.turn(a); !strings.Contains(sys, "sub rules") {
		t.Fatalf("got %q", sys)
	}
	if err := f.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if sys := e.turn(a); sys != "You are a test agent." {
		t.Fatalf("the unloaded plugin left its section: %q", sys)
	}
}

// TestInAPreset: mounted in an agent's scope, it serves that agent only.
func TestInAPreset(t *testing.T) {
	_, ws := repo(t)
	e := newEnv(t, nil)
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a",
		Options: agents.Options{Provider: "scripted", Workspace: ws},
		Setup: func(scope *dshctx.Context) error {
			f, err := scope.Plugin(agentsmd.Plugin, agentsmd.Config{}.Defaults())
			if err != nil {
				return err
			}
			return f.Await(stdctx.Background())
		}})
	if err != nil {
		t.Fatal(err)
	}
	b := e.create("b", ws)
	if sys := e.turn(h.Agent); !strings.Contains(sys, "sub rules") {
		t.Fatalf("got %q", sys)
	}
	if sys := e.turn(b); strings.Contains(sys, "sub rules") {
		t.Fatalf("another agent got the preset's section: %q", sys)
	}
	if err := h.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []agentsmd.Config{
		{Names: nil, MaxFileBytes: 1, MaxBytes: 1},
		{Names: []string{"../AGENTS.md"}, MaxFileBytes: 1, MaxBytes: 1},
		{Names: []string{"AGENTS.md"}, MaxFileBytes: 0, MaxBytes: 1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v must be refused", c)
		}
	}
	if err := (agentsmd.Config{}.Defaults()).Validate(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkTurn is one turn of one step (Followup → WhenIdle, scripted
// model) without the plugin, with it and no AGENTS.md, and with two files
// in a workspace three directories deep: the per-turn price of the check.
func BenchmarkTurn(b *testing.B) {
	for _, c := range []struct {
		name  string
		mount bool
		files bool
	}{{"off", false, false}, {"on/no-files", true, false}, {"on/3dirs-2files", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			root := b.TempDir()
			ws := filepath.Join(root, "a", "b")
			if err := os.MkdirAll(ws, 0o755); err != nil {
				b.Fatal(err)
			}
			if c.files {
				os.Mkdir(filepath.Join(root, ".git"), 0o755)
				write(b, filepath.Join(root, "AGENTS.md"), strings.Repeat("Run the tests.\n", 256))
				write(b, filepath.Join(ws, "AGENTS.md"), strings.Repeat("Keep it short.\n", 256))
			}
			var cfg *agentsmd.Config
			if c.mount {
				cfg = defaults()
			}
			e := newEnv(b, cfg)
			a := e.create("a", ws)
			msg := llm.Message{Role: llm.RoleUser, Content: "hi"}
			ctx := stdctx.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := a.Followup(msg); err != nil {
					b.Fatal(err)
				}
				if err := a.WhenIdle(ctx); err != nil {
					b.Fatal(err)
				}
				if i%1024 == 0 {
					e.mu.Lock()
					e.systems = e.systems[:0]
					e.mu.Unlock()
				}
			}
		})
	}
}
