package context_test

import (
	stdctx "context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

type counter struct{ n int }

var counterKey = dshctx.NewKey[*counter]("counter")

func provider(name string, c *counter) dshctx.Plugin {
	return dshctx.Define(name, func(ctx *dshctx.Context, _ any) error {
		return counterKey.Provide(ctx, c)
	})
}

func TestInjectingPluginWaitsForProvider(t *testing.T) {
	root, _ := newRoot(t)
	var got *counter
	dep := mustPlugin(t, root, dshctx.Define("dep", func(ctx *dshctx.Context, _ any) error {
		var err error
		got, err = counterKey.Get(ctx)
		return err
	}, counterKey))
	if dep.State() != dshctx.StatePending {
		t.Fatalf("dependent should wait, is %s", dep.State())
	}
	c := &counter{}
	mustPlugin(t, root, provider("prov", c))
	if err := dep.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Fatal("dependent read the wrong service")
	}
}

func TestDependentUnloadsBeforeProviderTeardownAndReturns(t *testing.T) {
	root, _ := newRoot(t)
	var mu sync.Mutex
	var log []string
	record := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	dep := mustPlugin(t, root, dshctx.Define("dep", func(ctx *dshctx.Context, _ any) error {
		record("dep apply")
		_, err := ctx.OnDispose("dep teardown", func() error {
			// The service must still be readable while the dependent unloads.
			if _, err := counterKey.Get(ctx); err != nil {
				record("dep teardown could not read: " + err.Error())
				return nil
			}
			record("dep teardown read ok")
			return nil
		})
		return err
	}, counterKey))
	prov := mustPlugin(t, root, dshctx.Define("prov", func(ctx *dshctx.Context, _ any) error {
		ctx.OnDispose("prov teardown", func() error { record("prov teardown"); return nil })
		return counterKey.Provide(ctx, &counter{})
	}))
	prov.Dispose(stdctx.Background())
	if dep.State() != dshctx.StatePending {
		t.Fatalf("dependent should be pending again, is %s", dep.State())
	}
	mustPlugin(t, root, provider("prov2", &counter{}))
	if dep.State() != dshctx.StateActive {
		t.Fatalf("dependent should be re-applied, is %s", dep.State())
	}
	want := []string{"dep apply", "dep teardown read ok", "prov teardown", "dep apply"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(log, want) {
		t.Fatalf("order\n got %v\nwant %v", log, want)
	}
}

func TestServiceReadRules(t *testing.T) {
	root, _ := newRoot(t)
	otherKey := dshctx.NewKey[string]("other")
	if err := otherKey.Provide(root, "x"); err != nil {
		t.Fatal(err)
	}
	var kept *dshctx.Context
	f := mustPlugin(t, root, dshctx.Define("reader", func(ctx *dshctx.Context, _ any) error {
		kept = ctx
		_, err := counterKey.Get(ctx)
		wantCode(t, err, errs.ServiceNotInjected)
		if !strings.Contains(err.Error(), "reader") || !strings.Contains(err.Error(), "counter") {
			t.Errorf("error should name plugin and key: %v", err)
		}
		v, err := otherKey.Get(ctx)
		if err != nil || v != "x" {
			t.Errorf("injected read failed: %v", err)
		}
		return nil
	}, otherKey))
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	// Root-level code may read anything.
	if v, err := otherKey.Get(root); err != nil || v != "x" {
		t.Fatalf("root read: %v", err)
	}
	_, err := counterKey.Get(root)
	wantCode(t, err, errs.ServiceUnavailable)
	f.Dispose(stdctx.Background())
	_, err = otherKey.Get(kept)
	wantCode(t, err, errs.ContextInactive)
}

func TestSecondProviderNamesBothFibers(t *testing.T) {
	root, _ := newRoot(t)
	mustPlugin(t, root, provider("first", &counter{}))
	second := mustPlugin(t, root, provider("second", &counter{}))
	err := second.Await(stdctx.Background())
	wantCode(t, err, errs.ServiceConflict)
	if !strings.Contains(err.Error(), `"first"`) || !strings.Contains(err.Error(), `"second"`) {
		t.Fatalf("error should name both fibers: %v", err)
	}
}

func TestServiceOfLoadingProviderIsStagedUntilActive(t *testing.T) {
	root, _ := newRoot(t)
	var seen dshctx.State
	dep := mustPlugin(t, root, dshctx.Define("dep", func(*dshctx.Context, any) error { return nil }, counterKey))
	mustPlugin(t, root, dshctx.Define("prov", func(ctx *dshctx.Context, _ any) error {
		if err := counterKey.Provide(ctx, &counter{}); err != nil {
			return err
		}
		seen = dep.State()
		return nil
	}))
	if seen != dshctx.StatePending {
		t.Fatalf("dependent ran before its provider finished loading (state %s)", seen)
	}
	if dep.State() != dshctx.StateActive {
		t.Fatalf("dependent should be active after provider loaded, is %s", dep.State())
	}
	// A provider that fails takes its staged service with it.
	root2, _ := newRoot(t)
	dep2 := mustPlugin(t, root2, dshctx.Define("dep", func(*dshctx.Context, any) error { return nil }, counterKey))
	mustPlugin(t, root2, dshctx.Define("prov", func(ctx *dshctx.Context, _ any) error {
		counterKey.Provide(ctx, &counter{})
		return errs.New(errs.InvalidArgument, "no")
	}))
	if dep2.State() != dshctx.StatePending {
		t.Fatalf("failed provider must not wake dependents, dep is %s", dep2.State())
	}
	if _, err := counterKey.Get(root2); !errs.HasCode(err, errs.ServiceUnavailable) {
		t.Fatalf("failed provider's service must be gone: %v", err)
	}
}

func TestDependencyLostWhileLoadingUnloadsRightAfter(t *testing.T) {
	root, _ := newRoot(t)
	prov := mustPlugin(t, root, provider("prov", &counter{}))
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var events []string
	root.WatchFibers(func(ch dshctx.FiberChange) {
		if ch.Fiber.Name() == "dep" {
			mu.Lock()
			events = append(events, ch.To.String())
			mu.Unlock()
		}
	})
	var dep *dshctx.Fiber
	done := make(chan struct{})
	go func() {
		defer close(done)
		dep = mustPlugin(t, root, dshctx.Define("dep", func(*dshctx.Context, any) error {
			close(entered)
			<-release
			return nil
		}, counterKey))
	}()
	<-entered
	disposed := make(chan struct{})
	go func() { prov.Dispose(stdctx.Background()); close(disposed) }()
	time.Sleep(10 * time.Millisecond)
	close(release)
	<-disposed
	<-done
	mu.Lock()
	defer mu.Unlock()
	want := []string{"loading", "active", "unloading", "pending"}
	if !slices.Equal(events, want) {
		t.Fatalf("dep transitions %v, want %v", events, want)
	}
	if dep.State() != dshctx.StatePending {
		t.Fatalf("dep is %s", dep.State())
	}
}

func TestDisposedPendingFiberAwaitReturns(t *testing.T) {
	root, _ := newRoot(t)
	dep := mustPlugin(t, root, dshctx.Define("dep", func(*dshctx.Context, any) error { return nil }, counterKey))
	go func() { time.Sleep(5 * time.Millisecond); dep.Dispose(stdctx.Background()) }()
	wantCode(t, dep.Await(stdctx.Background()), errs.ContextInactive)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	cancel()
	dep2 := mustPlugin(t, root, dshctx.Define("dep2", func(*dshctx.Context, any) error { return nil }, counterKey))
	wantCode(t, dep2.Await(ctx), errs.ContextInactive)
}

// TestOnlyFailuresNobodyAwaitsAreLoggedAsErrors: the first Apply's error
// goes to Await (logging it too made the CLI show every start-up failure
// twice); a re-apply after the injected service changed has no caller, so
// its failure is logged as an error.
func TestOnlyFailuresNobodyAwaitsAreLoggedAsErrors(t *testing.T) {
	root, logs := newRoot(t)
	failing := mustPlugin(t, root, dshctx.Define("broken", func(*dshctx.Context, any) error {
		return errs.New(errs.InvalidArgument, "broken from the start")
	}))
	wantCode(t, failing.Await(stdctx.Background()), errs.PluginFailed)
	if out := logs.String(); strings.Contains(out, "[ERROR]") || !strings.Contains(out, "[DEBUG] broken: plugin failed") {
		t.Fatalf("a first failure must be logged at debug level only:\n%s", out)
	}

	applies := 0
	dep := mustPlugin(t, root, dshctx.Define("fragile", func(ctx *dshctx.Context, _ any) error {
		applies++
		if applies > 1 {
			return errs.New(errs.InvalidArgument, "cannot work with the new counter")
		}
		_, err := counterKey.Get(ctx)
		return err
	}, counterKey))
	prov := mustPlugin(t, root, provider("prov", &counter{}))
	if err := dep.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	prov.Dispose(stdctx.Background())
	mustPlugin(t, root, provider("prov2", &counter{}))
	if dep.State() != dshctx.StateFailed {
		t.Fatalf("the re-apply should have failed, the fiber is %s", dep.State())
	}
	if out := logs.String(); !strings.Contains(out, "[ERROR] fragile: plugin failed") {
		t.Fatalf("a re-apply's failure must be logged as an error:\n%s", out)
	}
}
