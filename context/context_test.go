package context_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/internal/syncbuf"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRoot(t *testing.T) (*dshctx.Context, *syncbuf.Buffer) {
	t.Helper()
	buf := &syncbuf.Buffer{}
	root := dshctx.New(dshctx.WithLogger(hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Debug})))
	ctxtest.Cleanup(t, root)
	return root, buf
}

func mustPlugin(t *testing.T, ctx *dshctx.Context, p dshctx.Plugin) *dshctx.Fiber {
	t.Helper()
	f, err := ctx.Plugin(p, nil)
	if err != nil {
		t.Fatalf("Plugin: %v", err)
	}
	return f
}

func wantCode(t *testing.T, err error, code errs.Code) {
	t.Helper()
	if !errs.HasCode(err, code) {
		t.Fatalf("want error with code %s, got %v", code, err)
	}
}

func TestNewUsesGivenLogger(t *testing.T) {
	root, buf := newRoot(t)
	root.Logger().Info("hello from root")
	if !strings.Contains(buf.String(), "hello from root") {
		t.Fatalf("log went elsewhere: %q", buf.String())
	}
	if !root.Active() || root.Fiber().State() != dshctx.StateActive {
		t.Fatal("a new root must be active")
	}
}

func TestPluginAppliesInOwnFiberWithConfig(t *testing.T) {
	root, _ := newRoot(t)
	var got any
	var inner *dshctx.Context
	f := mustPlugin(t, root, dshctx.Define("greeter", func(ctx *dshctx.Context, cfg any) error {
		got, inner = cfg, ctx
		return nil
	}))
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if f.Name() != "greeter" || f.State() != dshctx.StateActive {
		t.Fatalf("fiber %q in state %s", f.Name(), f.State())
	}
	if inner.Fiber() != f || inner.Fiber() == root.Fiber() {
		t.Fatal("the plugin must run in its own fiber")
	}
	if got != nil {
		t.Fatalf("Apply got config %v, want the nil it was given", got)
	}

	g, _ := root.Plugin(unnamed{}, 42)
	if !strings.Contains(g.Name(), "unnamed") {
		t.Fatalf("unnamed plugin should be named after its type, got %q", g.Name())
	}
}

func TestEffectsUndoneInReverseOrder(t *testing.T) {
	root, _ := newRoot(t)
	var order []string
	f := mustPlugin(t, root, dshctx.Define("p", func(ctx *dshctx.Context, _ any) error {
		for _, name := range []string{"a", "b", "c"} {
			if _, err := ctx.Effect(name, func() (dshctx.Disposer, error) {
				return func() error { order = append(order, name); return nil }, nil
			}); err != nil {
				return err
			}
		}
		_, err := ctx.Plugin(dshctx.Define("child", func(c *dshctx.Context, _ any) error {
			_, err := c.OnDispose("child-effect", func() error { order = append(order, "child"); return nil })
			return err
		}), nil)
		return err
	}))
	f.Dispose(stdctx.Background())
	if want := []string{"child", "c", "b", "a"}; !slices.Equal(order, want) {
		t.Fatalf("dispose order %v, want %v", order, want)
	}
	f.Dispose(stdctx.Background()) // idempotent
	if len(order) != 4 {
		t.Fatalf("second dispose ran disposers again: %v", order)
	}
}

func TestEffectOffRunsDisposerOnce(t *testing.T) {
	root, _ := newRoot(t)
	n := 0
	off, err := root.Effect("count", func() (dshctx.Disposer, error) {
		return func() error { n++; return nil }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	off()
	off()
	root.Dispose(stdctx.Background())
	if n != 1 {
		t.Fatalf("disposer ran %d times, want 1", n)
	}
}

func TestEffectSetupFailureRegistersNothing(t *testing.T) {
	root, _ := newRoot(t)
	boom := errors.New("boom")
	if _, err := root.Effect("x", func() (dshctx.Disposer, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("want setup error, got %v", err)
	}
}

func TestDisposerErrorIsLoggedAndRestStillRun(t *testing.T) {
	root, logs := newRoot(t)
	ran := []string{}
	f := mustPlugin(t, root, dshctx.Define("p", func(ctx *dshctx.Context, _ any) error {
		ctx.OnDispose("first", func() error { ran = append(ran, "first"); return nil })
		ctx.OnDispose("broken", func() error { return errors.New("disk on fire") })
		ctx.OnDispose("panicky", func() error { panic("oops") })
		return nil
	}))
	f.Dispose(stdctx.Background())
	if !slices.Equal(ran, []string{"first"}) {
		t.Fatalf("remaining disposers did not run: %v", ran)
	}
	out := logs.String()
	for _, want := range []string{"disk on fire", "broken", "oops", "panicky"} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
}

func TestDisposeWaitsForInFlightApply(t *testing.T) {
	root, _ := newRoot(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var applied, disposed bool
	var mu sync.Mutex
	var f *dshctx.Fiber
	done := make(chan struct{})
	go func() {
		defer close(done)
		f = mustPlugin(t, root, dshctx.Define("slow", func(ctx *dshctx.Context, _ any) error {
			close(entered)
			<-release
			mu.Lock()
			applied = true
			mu.Unlock()
			_, err := ctx.OnDispose("mark", func() error { mu.Lock(); disposed = applied; mu.Unlock(); return nil })
			return err
		}))
	}()
	<-entered
	var fiber *dshctx.Fiber
	// The fiber is not returned yet; find it through the watcher instead.
	for _, c := range root.Fiber().Children() {
		fiber = c
	}
	disposeDone := make(chan struct{})
	go func() { fiber.Dispose(stdctx.Background()); close(disposeDone) }()
	select {
	case <-disposeDone:
		t.Fatal("Dispose returned while Apply was still running")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-disposeDone
	<-done
	mu.Lock()
	defer mu.Unlock()
	if !disposed || f.State() != dshctx.StateDisposed {
		t.Fatalf("apply's effect was not undone after the waited-for apply (disposed=%v state=%s)", disposed, f.State())
	}
}

func TestRegisteringThroughDisposedContextFails(t *testing.T) {
	root, _ := newRoot(t)
	var kept *dshctx.Context
	f := mustPlugin(t, root, dshctx.Define("p", func(ctx *dshctx.Context, _ any) error { kept = ctx; return nil }))
	f.Dispose(stdctx.Background())
	_, err := kept.OnDispose("late", func() error { return nil })
	wantCode(t, err, errs.ContextInactive)
	if !strings.Contains(err.Error(), "inactive") {
		t.Fatalf("message should say inactive: %v", err)
	}
	_, err = kept.Plugin(dshctx.Define("late", func(*dshctx.Context, any) error { return nil }), nil)
	wantCode(t, err, errs.ContextInactive)
	_, err = kept.Scoped("a")
	wantCode(t, err, errs.ContextInactive)
	_, err = kept.Effect("e", func() (dshctx.Disposer, error) { t.Fatal("setup ran"); return nil, nil })
	wantCode(t, err, errs.ContextInactive)
}

func TestFiberStatesAreObservable(t *testing.T) {
	root, _ := newRoot(t)
	var mu sync.Mutex
	var seen []string
	root.WatchFibers(func(ch dshctx.FiberChange) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s:%s->%s", ch.Fiber.Name(), ch.From, ch.To))
	})
	f := mustPlugin(t, root, dshctx.Define("p", func(*dshctx.Context, any) error { return nil }))
	f.Dispose(stdctx.Background())
	mustPlugin(t, root, dshctx.Define("bad", func(*dshctx.Context, any) error { return errors.New("no") }))
	want := []string{
		"p:pending->loading", "p:loading->active", "p:active->unloading", "p:unloading->disposed",
		"bad:pending->loading", "bad:loading->failed",
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, want) {
		t.Fatalf("transitions\n got %v\nwant %v", seen, want)
	}
}

func TestFailedApplyRemovesWhatItRegistered(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fail  func() error
		check string
	}{
		{"error", func() error { return errors.New("config is wrong") }, "config is wrong"},
		{"panic", func() error { panic("kaboom") }, "kaboom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _ := newRoot(t)
			undone := false
			sibling := mustPlugin(t, root, dshctx.Define("sibling", func(*dshctx.Context, any) error { return nil }))
			f := mustPlugin(t, root, dshctx.Define("broken", func(ctx *dshctx.Context, _ any) error {
				ctx.OnDispose("half", func() error { undone = true; return nil })
				return tc.fail()
			}))
			err := f.Await(stdctx.Background())
			wantCode(t, err, errs.PluginFailed)
			if !strings.Contains(err.Error(), tc.check) || !strings.Contains(err.Error(), "broken") {
				t.Fatalf("error should name the plugin and the cause: %v", err)
			}
			if f.State() != dshctx.StateFailed || !undone {
				t.Fatalf("state %s, undone %v", f.State(), undone)
			}
			if sibling.State() != dshctx.StateActive {
				t.Fatalf("sibling is %s", sibling.State())
			}
		})
	}
}

func TestStdContextDoneErrValue(t *testing.T) {
	root, _ := newRoot(t)
	var ctx *dshctx.Context
	stopped := make(chan struct{})
	f := mustPlugin(t, root, dshctx.Define("worker", func(c *dshctx.Context, _ any) error {
		ctx = c
		go func() { <-c.Done(); close(stopped) }()
		return nil
	}))
	var std stdctx.Context = ctx
	if std.Err() != nil {
		t.Fatal("active context has an error")
	}
	type key struct{}
	got, ok := dshctx.FromStd(stdctx.WithValue(ctx, key{}, "v"))
	if !ok || got != ctx {
		t.Fatal("FromStd must find the dsh context in a derived context")
	}
	f.Dispose(stdctx.Background())
	select {
	case <-stopped:
	case <-time.After(time.Second):
		t.Fatal("goroutine did not stop with the fiber")
	}
	err := std.Err()
	if !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("Err should match context.Canceled: %v", err)
	}
	wantCode(t, err, errs.ContextInactive)
	if !strings.Contains(err.Error(), "worker") {
		t.Fatalf("Err should say which fiber: %v", err)
	}
}

func TestValueChainsToParent(t *testing.T) {
	root, _ := newRoot(t)
	scope, err := root.Scoped("agent-1")
	if err != nil {
		t.Fatal(err)
	}
	var inner *dshctx.Context
	mustPlugin(t, scope, dshctx.Define("p", func(c *dshctx.Context, _ any) error { inner = c; return nil }))
	if c, _ := dshctx.FromStd(inner); c != inner {
		t.Fatal("Value must find the nearest dsh context")
	}
	if inner.Value("missing") != nil {
		t.Fatal("unknown keys chain to nil")
	}
	if inner.Tag() != "agent-1" {
		t.Fatalf("plugins in a scope inherit its tag, got %q", inner.Tag())
	}
	if inner.Root() != root {
		t.Fatal("Root must return the root")
	}
}

func TestBadInput(t *testing.T) {
	root, _ := newRoot(t)
	_, err := root.Plugin(nil, nil)
	wantCode(t, err, errs.InvalidArgument)
	_, err = root.Scoped("")
	wantCode(t, err, errs.InvalidArgument)
	_, err = root.Effect("x", nil)
	wantCode(t, err, errs.InvalidArgument)
	_, err = root.OnDispose("x", nil)
	wantCode(t, err, errs.InvalidArgument)
	var nilPtr *struct{}
	err = dshctx.NewKey[*struct{}]("thing").Provide(root, nilPtr)
	wantCode(t, err, errs.InvalidArgument)
	err = dshctx.NewKey[*struct{}]("").Provide(root, &struct{}{})
	wantCode(t, err, errs.InvalidArgument)
	_, err = root.Plugin(dshctx.Define("p", func(*dshctx.Context, any) error { return nil }, nil), nil)
	wantCode(t, err, errs.InvalidArgument)
	_, err = dshctx.NewKey[int]("n").Get(nil)
	wantCode(t, err, errs.InvalidArgument)
}

func TestDisposeFromInsideApplyHappensRightAfter(t *testing.T) {
	root, _ := newRoot(t)
	undone := false
	f := mustPlugin(t, root, dshctx.Define("quitter", func(ctx *dshctx.Context, _ any) error {
		ctx.OnDispose("mark", func() error { undone = true; return nil })
		ctx.Dispose(stdctx.Background()) // must not deadlock waiting for this very Apply
		return nil
	}))
	if f.State() != dshctx.StateDisposed || !undone {
		t.Fatalf("state %s, undone %v", f.State(), undone)
	}
}

// TestDerivedStdContextsNeedNoWatcher: context.WithCancel on a *Context
// uses its AfterFunc instead of a goroutine per derived context, and the
// derived context still ends with the fiber.
func TestDerivedStdContextsNeedNoWatcher(t *testing.T) {
	root, _ := newRoot(t)
	var pctx *dshctx.Context
	f := mustPlugin(t, root, dshctx.Define("p", func(ctx *dshctx.Context, _ any) error {
		pctx = ctx
		return nil
	}))
	before := runtime.NumGoroutine()
	var cancels []stdctx.CancelFunc
	var derived []stdctx.Context
	for range 100 {
		c, cancel := stdctx.WithCancel(pctx)
		derived, cancels = append(derived, c), append(cancels, cancel)
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		t.Fatalf("100 derived contexts started %d goroutines", n-before)
	}
	// A cancelled child stops its AfterFunc: nothing fires for it later.
	cancels[0]()
	f.Dispose(stdctx.Background())
	for i, c := range derived {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("derived context %d did not end with the fiber", i)
		}
		if i > 0 && !errors.Is(c.Err(), stdctx.Canceled) {
			t.Fatalf("derived context %d: %v", i, c.Err())
		}
	}
	for _, cancel := range cancels {
		cancel()
	}
	// Deriving from an ended context ends at once.
	c, cancel := stdctx.WithCancel(pctx)
	defer cancel()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived from an ended fiber's context never ended")
	}
}

// unnamed is a plugin without a Name method.
type unnamed struct{}

func (unnamed) Apply(*dshctx.Context, any) error { return nil }
