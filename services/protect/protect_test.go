package protect_test

import (
	stdctx "context"
	"path/filepath"
	"slices"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/hashicorp/go-hclog"
)

func TestMatchByComponentsAnywhereAndAbsoluteFromTheRoot(t *testing.T) {
	l := protect.New(protect.Entry{Path: "/etc/dsh/config.yaml", What: "dsh's config"})
	ws := "/w"
	for p, want := range map[string]string{
		"/w/.git/config":                 ".git/config",
		"/w/.git/hooks/pre-commit":       ".git/hooks",
		"/w/.git/HEAD":                   ".git",
		"/w/.git/commondir":              ".git/commondir",
		"/w/.git/worktrees/wt/commondir": ".git/worktrees",
		"/w/.git/config.worktree":        ".git/config.worktree",
		"/w/.GIT/Config":                 ".git/config",
		"/w/vendor/x/.git/config":        ".git/config",
		"/w/.claude/settings.json":       ".claude",
		"/w/docs/AGENTS.md":              "AGENTS.md",
		"/etc/dsh/config.yaml":           "/etc/dsh/config.yaml",
		"/w/.mcp.json":                   ".mcp.json",
		"/w/.agents/skills/a/SKILL.md":   ".agents",
	} {
		e, ok := l.Match(ws, p)
		if !ok || e.Path != want {
			t.Errorf("%s: matched %q (%v), want %q", p, e.Path, ok, want)
		}
	}
	for _, p := range []string{"/w/src/git/config", "/w/.gitignore", "/w/my.git/config", "/w/AGENTS.md.bak", "/elsewhere/.git/config", "/etc/dsh/other.yaml"} {
		if e, ok := l.Match(ws, p); ok {
			t.Errorf("%s: matched %+v, want nothing", p, e)
		}
	}
}

func TestPathsForTheSandboxAndRegistrationsLeaveWithTheirFiber(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	f, err := root.Plugin(protect.Plugin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	l, err := protect.Key.Get(root)
	if err != nil {
		t.Fatal(err)
	}
	loader := dshctx.Define("loader", func(ctx *dshctx.Context, _ any) error {
		return protect.Register(ctx, protect.Entry{Path: "/srv/hooks.json", What: "a hooks file"})
	}, protect.Key)
	lf, err := root.Plugin(loader, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lf.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	paths, err := protect.PathsFor(root, "/w")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/w/.git/config", "/w/.git/hooks", "/w/.claude", "/w/AGENTS.md", "/srv/hooks.json"} {
		if !slices.Contains(paths, filepath.FromSlash(want)) {
			t.Errorf("Paths lacks %s: %v", want, paths)
		}
	}
	if err := lf.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Match("/w", "/srv/hooks.json"); ok {
		t.Fatal("the entry outlived the plugin that registered it")
	}
	// Another tree has its own list.
	if _, ok := protect.New().Match("/w", "/srv/hooks.json"); ok {
		t.Fatal("lists share entries")
	}
}

func TestTheOperatorsPathsJoinTheList(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	for _, p := range []struct {
		p   dshctx.Plugin
		cfg any
	}{{protect.Plugin, nil}, {protect.PathsPlugin, protect.PathsConfig{Paths: []protect.Entry{{Path: "deploy/secrets.yaml"}}}}} {
		f, err := root.Plugin(p.p, p.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := protect.Key.Get(root)
	if e, ok := l.Match("/w", "/w/deploy/secrets.yaml"); !ok || e.What == "" {
		t.Fatalf("%+v %v", e, ok)
	}
	if err := (protect.PathsConfig{Paths: []protect.Entry{{What: "x"}}}).Validate(); err == nil {
		t.Fatal("an entry without a path must be refused")
	}
}

// TestSecretsListsOnlySecretEntries: the sandbox hides what Secrets lists,
// so an ordinary entry must not be in it, and a relative secret is joined
// to the workspace.
func TestSecretsListsOnlySecretEntries(t *testing.T) {
	l := protect.New(protect.Entry{Path: "/srv/store", Secret: true}, protect.Entry{Path: ".dsh/serve", Secret: true})
	got := l.Secrets("/w")
	if len(got) != 2 || got[0] != "/srv/store" || got[1] != "/w/.dsh/serve" {
		t.Fatalf("Secrets = %q", got)
	}
}
