package tools_test

import (
	stdctx "context"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// TestEachAgentScopeHoldsItsOwnService: a plugin mounted in an agent's scope
// (as a preset is) reads the agent's own tools service, so the same plugin
// mounted for two agents registers the same tool name twice without
// conflict, and each agent's tools leave with its scope.
func TestEachAgentScopeHoldsItsOwnService(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	f, _ := root.Plugin(tools.Plugin, nil)
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	global, _ := tools.Key.Get(root)
	preset := dshctx.Define("preset", func(ctx *dshctx.Context, _ any) error {
		s, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return s.Register(ctx, tools.Tool{Name: "mine", Execute: echo(ctx.Tag())})
	}, tools.Key)
	var scopes []*dshctx.Context
	for _, tag := range []string{"a", "b"} {
		sc, _ := root.Scoped(tag)
		p, _ := sc.Plugin(preset, nil)
		if err := p.Await(stdctx.Background()); err != nil {
			t.Fatalf("preset in %s: %v", tag, err)
		}
		scopes = append(scopes, sc)
	}
	a, b := scopes[0], scopes[1]
	own, err := tools.Key.Get(a)
	if err != nil || own == global {
		t.Fatalf("agent a must see a service of its own: %v", err)
	}
	if len(global.Specs(root)) != 0 {
		t.Fatal("an agent's tool leaked to the root")
	}
	for _, sc := range scopes {
		r, _ := global.Execute(stdctx.Background(), sc, tools.Call{Name: "mine"})
		if r.Content != sc.Tag() {
			t.Fatalf("agent %s ran %q", sc.Tag(), r.Content)
		}
	}
	a.Dispose(stdctx.Background())
	if r, _ := global.Execute(stdctx.Background(), b, tools.Call{Name: "mine"}); r.Content != "b" {
		t.Fatalf("b lost its tool with a's scope: %q", r.Content)
	}
	if got, _ := tools.Key.Get(b); got == own {
		t.Fatal("b must not see a's service")
	}
}
