package web

import (
	stdctx "context"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// TestAModeKeepsTheRootsWebFetch: a tools.web mounted in an agent's scope
// with inherit (as the built-in modes mount it) leaves the root's
// web_fetch, with the root's network policy, in force; without inherit it
// shadows it with its own.
func TestAModeKeepsTheRootsWebFetch(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	mount := func(at *dshctx.Context, cfg Config) {
		t.Helper()
		f, err := at.Plugin(Plugin, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	f, _ := root.Plugin(tools.Plugin, nil)
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	mount(root, Config{Network: map[string]any{"allow": []any{"*"}, "deny": []any{"denied.test"}}})
	svc, _ := tools.Key.Get(root)
	policyOf := func(at *dshctx.Context) string {
		tool := svc.Lookup(at, FetchTool)
		if tool == nil {
			t.Fatal("no web_fetch")
		}
		if !tool.ParallelSafe || tool.Approval != tools.Ask {
			t.Fatalf("web_fetch must be parallel-safe and ask by default: %+v", tool)
		}
		return tool.Description
	}
	mode, _ := root.Scoped("moded")
	mount(mode, Config{Inherit: true})
	if d := policyOf(mode); !strings.Contains(d, "deny: denied.test") {
		t.Fatalf("with inherit the root's web_fetch must stay: %s", d)
	}
	own, _ := root.Scoped("own")
	mount(own, Config{})
	if d := policyOf(own); strings.Contains(d, "denied.test") || !strings.Contains(d, "egress policy (on)") {
		t.Fatalf("without inherit the agent's own web_fetch shadows the root's: %s", d)
	}
	// Alone, a mode's tools.web registers its web_fetch.
	alone := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer alone.Dispose(stdctx.Background())
	f, _ = alone.Plugin(tools.Plugin, nil)
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	sc, _ := alone.Scoped("a")
	mount(sc, Config{Inherit: true})
	s2, _ := tools.Key.Get(alone)
	if s2.Lookup(sc, FetchTool) == nil || s2.Lookup(sc, SearchTool) != nil {
		t.Fatal("a mode alone must mount web_fetch and not web_search")
	}
}

// TestAMissingKeyStopsTheStartNamingTheVariable: web_search with a
// provider whose key's variable is unset fails the plugin's start, and
// the error names the variable.
func TestAMissingKeyStopsTheStartNamingTheVariable(t *testing.T) {
	t.Setenv("WEBTEST_UNSET_KEY", "")
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	f, _ := root.Plugin(tools.Plugin, nil)
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	p, err := root.Plugin(Plugin, Config{Search: SearchConfig{Provider: "brave", APIKeyEnv: "WEBTEST_UNSET_KEY"}})
	if err == nil {
		err = p.Await(stdctx.Background())
	}
	if !errs.HasCode(err, KeyMissing) || !strings.Contains(err.Error(), "WEBTEST_UNSET_KEY") {
		t.Fatalf("want %s naming the variable, got %v", KeyMissing, err)
	}
}
