package context_test

import (
	stdctx "context"
	"fmt"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/hashicorp/go-hclog"
)

func quietRoot(tb testing.TB) *dshctx.Context {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(tb, root)
	return root
}

// BenchmarkGet reads a root service from the root, through an agent's
// scope, and from a plugin in that scope that injects it: the scope chain
// adds one hop for an agent.
func BenchmarkGet(b *testing.B) {
	root := quietRoot(b)
	if err := counterKey.Provide(root, &counter{}); err != nil {
		b.Fatal(err)
	}
	scope, _ := root.Scoped("agent-1")
	var inPlugin *dshctx.Context
	f, _ := scope.Plugin(dshctx.Define("reader", func(ctx *dshctx.Context, _ any) error {
		inPlugin = ctx
		return nil
	}, counterKey), nil)
	if f.State() != dshctx.StateActive {
		b.Fatalf("reader is %s", f.State())
	}
	for _, at := range []struct {
		name string
		ctx  *dshctx.Context
	}{{"root", root}, {"agent-scope", scope}, {"plugin-in-scope", inPlugin}} {
		b.Run(at.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := counterKey.Get(at.ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAgentScopeCycle makes an agent's scope with one plugin that
// injects a root service, then disposes it, while n other agents' scopes
// hold such a plugin each: the cost must not grow with n.
func BenchmarkAgentScopeCycle(b *testing.B) {
	dep := dshctx.Define("dep", func(*dshctx.Context, any) error { return nil }, counterKey)
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			root := quietRoot(b)
			if err := counterKey.Provide(root, &counter{}); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				s, _ := root.Scoped(fmt.Sprintf("agent-%d", i))
				s.Plugin(dep, nil)
			}
			b.ReportAllocs()
			for b.Loop() {
				s, _ := root.Scoped("cycling")
				f, _ := s.Plugin(dep, nil)
				if f.State() != dshctx.StateActive {
					b.Fatalf("dep is %s", f.State())
				}
				s.Dispose(stdctx.Background())
			}
		})
	}
}
