package context_test

import (
	stdctx "context"
	"fmt"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
)

// BenchmarkPresetProviderCycle is an agent whose preset provides a service
// and a plugin that injects it, while n other agents hold the same preset:
// what failed with SERVICE_CONFLICT before scopes owned services.
func BenchmarkPresetProviderCycle(b *testing.B) {
	prov := dshctx.Define("prov", func(ctx *dshctx.Context, _ any) error {
		return counterKey.Provide(ctx, &counter{})
	})
	dep := dshctx.Define("dep", func(*dshctx.Context, any) error { return nil }, counterKey)
	preset := func(b *testing.B, s *dshctx.Context) {
		s.Plugin(prov, nil)
		if f, _ := s.Plugin(dep, nil); f.State() != dshctx.StateActive {
			b.Fatalf("dep is %s", f.State())
		}
	}
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			root := quietRoot(b)
			for i := range n {
				s, _ := root.Scoped(fmt.Sprintf("agent-%d", i))
				preset(b, s)
			}
			b.ReportAllocs()
			for b.Loop() {
				s, _ := root.Scoped("cycling")
				preset(b, s)
				s.Dispose(stdctx.Background())
			}
		})
	}
}
