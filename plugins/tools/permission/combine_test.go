package permission_test

import (
	stdctx "context"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

// rootAndPreset mounts root on the root and preset in agent "a"'s scope,
// as config.yaml's plugins: and an agent's preset do, and returns a's scope.
func rootAndPreset(t *testing.T, root, preset permission.Config) (*dshctx.Context, *dshctx.Fiber) {
	t.Helper()
	r := newRoot(t)
	mount(t, r, root)
	a, err := r.Scoped("a")
	if err != nil {
		t.Fatal(err)
	}
	return a, mount(t, a, preset)
}

func rules(rs ...permission.Rule) permission.Config { return permission.Config{Rules: rs} }

func TestTwoPolicies(t *testing.T) {
	gitAllow := permission.Rule{Command: "git *", Decision: tools.Allow}
	cases := []struct {
		name         string
		root, preset permission.Config
		command      string
		want         tools.Decision
		source       string
	}{
		{"root deny beats preset allow", rules(permission.Rule{Command: "git push *", Decision: tools.Deny}), rules(gitAllow),
			"git push origin", tools.Deny, "tools.permission:rules[0]"},
		{"preset deny beats root allow", rules(gitAllow), rules(permission.Rule{Command: "git push *", Decision: tools.Deny}),
			"git push origin", tools.Deny, "tools.permission@a:rules[0]"},
		{"preset deny of another part beats root allow", rules(gitAllow), rules(permission.Rule{Command: "rm *", Decision: tools.Deny}),
			"git status; rm x", tools.Deny, "tools.permission@a:rules[0]"},
		{"preset allow beats the tool's default ask", permission.Config{}, rules(gitAllow),
			"git status", tools.Allow, "tools.permission@a:rules[0]"},
		{"the root's mode decides before the preset", permission.Config{Mode: permission.WorkspaceWrite}, rules(gitAllow),
			"git status", tools.Ask, "tools.permission:mode=workspace-write"},
		{"a mode's deny is a deny too", rules(gitAllow), permission.Config{Mode: permission.ReadOnly},
			"git status", tools.Deny, "tools.permission@a:mode=read-only"},
		{"the root's rule decides before the preset's mode", rules(gitAllow), permission.Config{Mode: permission.WorkspaceWrite},
			"git status", tools.Allow, "tools.permission:rules[0]"},
		{"what the root leaves open the preset decides", rules(gitAllow), permission.Config{Mode: permission.ReadOnly},
			"git status && make", tools.Deny, "tools.permission@a:mode=read-only"},
		{"root allow and preset ask on other parts: strictest", rules(gitAllow), rules(permission.Rule{Command: "make *", Decision: tools.Ask}),
			"git status && make", tools.Ask, "tools.permission@a:rules[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, _ := rootAndPreset(t, c.root, c.preset)
			v := bash(a, t, c.command)
			if v.Decision != c.want || v.Source != c.source {
				t.Fatalf("got %+v, want %s from %s", v, c.want, c.source)
			}
		})
	}
}

func TestAPresetGovernsItsAgentOnly(t *testing.T) {
	a, preset := rootAndPreset(t, permission.Config{}, permission.Config{Deny: []string{"write"}})
	if v := approve(t, a, "write", onPath("x")); v.Decision != tools.Deny {
		t.Fatalf("a: %+v", v)
	}
	b, err := a.Root().Scoped("b")
	if err != nil {
		t.Fatal(err)
	}
	if v := approve(t, b, "write", onPath("x")); v.Decision != tools.Allow {
		t.Fatalf("b has no preset: %+v", v)
	}
	if err := preset.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if v := approve(t, a, "write", onPath("x")); v.Decision != tools.Allow {
		t.Fatalf("the policy left with its fiber: %+v", v)
	}
}

// TestTheRootStaysOutermostWhenAppliedAfterAPreset: a reload re-applies
// the root's plugins after the presets are mounted.
func TestTheRootStaysOutermostWhenAppliedAfterAPreset(t *testing.T) {
	r := newRoot(t)
	a, _ := r.Scoped("a")
	mount(t, a, rules(permission.Rule{Command: "git *", Decision: tools.Allow}))
	mount(t, r, permission.Config{Mode: permission.WorkspaceWrite})
	if v := bash(a, t, "git status"); v.Decision != tools.Ask || v.Source != "tools.permission:mode=workspace-write" {
		t.Fatalf("got %+v", v)
	}
}

// TestAnInnerPolicysAnswerIsUsedForWhatThisOneLeavesOpen: a listener
// after this plugin (another policy, or the default) decides the parts no
// rule of this one matches; its allow never loosens this one's ask.
func TestAnInnerPolicysAnswerIsUsedForWhatThisOneLeavesOpen(t *testing.T) {
	r := newRoot(t)
	mount(t, r, rules(permission.Rule{Command: "curl *", Decision: tools.Ask}))
	var seen int
	tools.EventApprove.On(r, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		seen++
		return tools.Verdict{Decision: tools.Allow, Source: "other"}, nil
	})
	if v := bash(r, t, "make"); v.Decision != tools.Allow || v.Source != "other" {
		t.Fatalf("make: %+v", v)
	}
	if v := bash(r, t, "curl x && make"); v.Decision != tools.Ask || v.Source != "tools.permission:rules[0]" {
		t.Fatalf("curl && make: %+v", v)
	}
	if seen != 2 {
		t.Fatalf("the inner policy was asked %d times", seen)
	}
}
