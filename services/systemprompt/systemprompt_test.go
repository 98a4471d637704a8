package systemprompt_test

import (
	stdctx "context"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

func TestSectionsVariablesAndScopes(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	s := systemprompt.New()
	a, _ := root.Scoped("a")
	b, _ := root.Scoped("b")
	s.Section(root, "rules", 10, "Be kind to {{user}}.")
	s.Section(root, "intro", 0, "You are {{name}}.")
	s.Variable(root, "name", "dsh")
	s.Variable(root, "user", "everyone")
	s.Section(a, "a-only", 5, "Agent A works on {{project}}.")
	s.Variable(a, "name", "Ada")
	s.Variable(a, "project", "compilers")

	if got, want := s.Render(a), "You are Ada.\n\nAgent A works on compilers.\n\nBe kind to everyone."; got != want {
		t.Fatalf("a:\n%q\nwant\n%q", got, want)
	}
	if got, want := s.Render(b), "You are dsh.\n\nBe kind to everyone."; got != want {
		t.Fatalf("b: %q", got)
	}
	// The assemble waterfall can rewrite, scoped like any event.
	systemprompt.EventAssemble.On(b, func(ctx stdctx.Context, as systemprompt.Assembly, next waterfall.Next[systemprompt.Assembly, string]) (string, error) {
		text, err := next.Call(ctx, as)
		return text + "\n\n(b's footer, " + as.AgentID + ")", err
	})
	gotB, _ := s.Assemble(stdctx.Background(), b)
	gotA, _ := s.Assemble(stdctx.Background(), a)
	if gotB != "You are dsh.\n\nBe kind to everyone.\n\n(b's footer, b)" || gotA != s.Render(a) {
		t.Fatalf("assemble: %q / %q", gotB, gotA)
	}
	// Unknown variables stay visible; a's sections leave with its scope.
	s.Section(b, "typo", 1, "{{nope}}")
	a.Dispose(stdctx.Background())
	if got := s.Render(a); got != "You are dsh.\n\nBe kind to everyone." {
		t.Fatalf("after a's scope went: %q", got)
	}
	if got := s.Render(b); got != "You are dsh.\n\n{{nope}}\n\nBe kind to everyone." {
		t.Fatalf("typo: %q", got)
	}
	if err := s.Variable(root, "name", "again"); err == nil {
		t.Fatal("a variable set twice in one scope must fail")
	}
}

// TestAgentRenderFollowsRootChanges: each agent's scope has a service of its
// own that caches its text, and a change at the root must still reach it.
func TestAgentRenderFollowsRootChanges(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	f, _ := root.Plugin(systemprompt.Plugin, nil)
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	s, _ := systemprompt.Key.Get(root)
	a, _ := root.Scoped("a")
	s.Section(a, "who", 0, "I am {{name}}.")
	if got, err := systemprompt.Key.Get(a); err != nil || got == s {
		t.Fatalf("agent a must have a service of its own: %v", err)
	}
	if got := s.Render(a); got != "I am {{name}}." {
		t.Fatalf("before: %q", got)
	}
	g, _ := root.Plugin(dshctx.Define("naming", func(ctx *dshctx.Context, _ any) error {
		return s.Variable(ctx, "name", "dsh")
	}), nil)
	if got := s.Render(a); got != "I am dsh." {
		t.Fatalf("after a root variable: %q", got)
	}
	g.Dispose(stdctx.Background())
	if got := s.Render(a); got != "I am {{name}}." {
		t.Fatalf("after the root variable went: %q", got)
	}
}
