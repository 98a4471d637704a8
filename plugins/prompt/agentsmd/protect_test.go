package agentsmd_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/plugins/prompt/agentsmd"
	"github.com/dsh-go/dsh/services/protect"
)

// TestConfiguredNamesAreProtectedWhileMounted: a name the plugin loads as
// instructions is on the protected list while the plugin is mounted, in
// any folder of a workspace, and leaves the list with it.
func TestConfiguredNamesAreProtectedWhileMounted(t *testing.T) {
	e := newEnv(t, nil)
	l, err := protect.Key.Get(e.root)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Match("/w", "/w/docs/CONVENTIONS.md"); ok {
		t.Fatal("protected before the plugin is mounted")
	}
	cfg := agentsmd.Config{}.Defaults()
	cfg.Names = []string{"CONVENTIONS.md", "AGENTS.md"}
	f := e.apply(cfg)
	if _, ok := l.Match("/w", "/w/docs/CONVENTIONS.md"); !ok {
		t.Fatal("a configured instructions file is not protected")
	}
	if err := f.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Match("/w", "/w/docs/CONVENTIONS.md"); ok {
		t.Fatal("the entry outlived the plugin")
	}
}
