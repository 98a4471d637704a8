package waterfall_test

import (
	stdctx "context"
	"slices"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/waterfall"
)

// named registers a listener that appends its config, a name, to the trace.
var named = dshctx.Define("named", func(ctx *dshctx.Context, cfg any) error {
	_, err := trace.On(ctx, func(c stdctx.Context, p []string, next waterfall.Next[[]string, []string]) ([]string, error) {
		return next.Call(c, append(p, cfg.(string)))
	})
	return err
})

var trace = waterfall.New[[]string, []string]("test/trace", func(_ stdctx.Context, p []string) ([]string, error) { return p, nil })

func apply(t *testing.T, at *dshctx.Context, key int64, name string) *dshctx.Fiber {
	t.Helper()
	f, err := at.PluginAt(key, named, name)
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func traceAt(t *testing.T, at *dshctx.Context) []string {
	t.Helper()
	got, err := trace.Dispatch(stdctx.Background(), at, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestOrderingKeyKeepsAReappliedFiberInPlace: a fiber re-applied with the
// key of the one it replaces runs where that one ran, before what was
// registered after it without a key — in its scope's dispatches too — and
// after a prepended listener.
func TestOrderingKeyKeepsAReappliedFiberInPlace(t *testing.T) {
	root := quietRoot(t)
	ka, kb, kc := waterfall.Position(), waterfall.Position(), waterfall.Position()
	apply(t, root, ka, "A")
	b := apply(t, root, kb, "B")
	apply(t, root, kc, "C")
	apply(t, root, 0, "late")
	scope, err := root.Scoped("agent")
	if err != nil {
		t.Fatal(err)
	}
	apply(t, scope, 0, "scoped")
	trace.On(root, func(c stdctx.Context, p []string, next waterfall.Next[[]string, []string]) ([]string, error) {
		return next.Call(c, append(p, "first"))
	}, waterfall.Prepend)
	if got := traceAt(t, scope); !slices.Equal(got, []string{"first", "A", "B", "C", "late", "scoped"}) {
		t.Fatalf("before: %v", got)
	}
	if err := b.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	b = apply(t, root, kb, "B2")
	if b.Order() != kb {
		t.Fatalf("order %d, want %d", b.Order(), kb)
	}
	mid, ok := waterfall.Between(kb, kc)
	if !ok {
		t.Fatal("no key between two positions")
	}
	apply(t, root, mid, "BC")
	for _, at := range []*dshctx.Context{scope, root} {
		want := []string{"first", "A", "B2", "BC", "C", "late", "scoped"}
		if at == root {
			want = slices.Delete(want, 6, 7)
		}
		if got := traceAt(t, at); !slices.Equal(got, want) {
			t.Fatalf("after (tag %q): %v", at.Tag(), got)
		}
	}
}

// TestOrderingKeyIsInherited: what a keyed fiber applies runs at its key.
func TestOrderingKeyIsInherited(t *testing.T) {
	root := quietRoot(t)
	k := waterfall.Position()
	apply(t, root, 0, "before")
	parent, err := root.PluginAt(k, dshctx.Define("parent", func(ctx *dshctx.Context, _ any) error {
		_, err := ctx.Plugin(named, "child")
		return err
	}), nil)
	if err != nil || parent.Await(stdctx.Background()) != nil {
		t.Fatal(err)
	}
	if got := traceAt(t, root); !slices.Equal(got, []string{"child", "before"}) {
		t.Fatalf("got %v", got)
	}
	if _, ok := waterfall.Between(k, k+1); ok {
		t.Fatal("Between found a key between neighbours")
	}
}
