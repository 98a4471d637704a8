package context_test

import (
	stdctx "context"
	"errors"
	"strings"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

var errDisk = errors.New("disk on fire")

func TestDisposerErrorsReachTheCallerAndAreLoggedOnce(t *testing.T) {
	root, logs := newRoot(t)
	scope, err := root.Scoped("a")
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	f := mustPlugin(t, scope, dshctx.Define("p", func(ctx *dshctx.Context, _ any) error {
		ctx.OnDispose("first", func() error { ran = true; return nil })
		ctx.OnDispose("broken", func() error { return errDisk })
		ctx.OnDispose("panicky", func() error { panic("oops") })
		return nil
	}))
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	// Disposed through its scope: the child fiber's errors come up whole.
	err = scope.Dispose(stdctx.Background())
	if !ran {
		t.Fatal("the disposers after the failing ones did not run")
	}
	if !errors.Is(err, errDisk) || !errs.Has(err, errs.PluginFailed, "context/dispose-failed") ||
		!errs.Has(err, errs.PluginFailed, "context/dispose-panic") {
		t.Fatalf("Dispose returned %v; want both failures with their reasons", err)
	}
	for _, want := range []string{`fiber "p"`, `effect "broken"`, `effect "panicky"`} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %s", err, want)
		}
	}
	if n := strings.Count(logs.String(), "disk on fire"); n != 1 {
		t.Fatalf("the failure was logged %d times, want once:\n%s", n, logs)
	}
	if err := scope.Dispose(stdctx.Background()); err != nil {
		t.Fatalf("a second Dispose returned %v; want nil", err)
	}
}

func TestSlowDisposerIsBoundedByCtxAndTeardownFinishes(t *testing.T) {
	root, _ := newRoot(t)
	scope, _ := root.Scoped("a")
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	release := make(chan struct{})
	after := false
	f := mustPlugin(t, scope, dshctx.Define("p", func(c *dshctx.Context, _ any) error {
		c.OnDispose("runs after", func() error { after = true; return nil })
		// The disposer ends the caller's ctx itself, so the deadline
		// passes exactly while it runs.
		c.OnDispose("slow flush", func() error { cancel(); <-release; return nil })
		return nil
	}))
	err := scope.Dispose(ctx)
	if !errs.Has(err, errs.ContextInactive, "context/dispose-timeout") || !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("Dispose returned %v; want a dispose timeout", err)
	}
	if !strings.Contains(err.Error(), `effect "slow flush" of fiber "p"`) {
		t.Fatalf("error %q does not name what was still running", err)
	}
	if st := f.State(); st != dshctx.StateUnloading {
		t.Fatalf("after the timeout the fiber is %s; want unloading", st)
	}
	close(release)
	if err := scope.Fiber().Await(stdctx.Background()); !errs.HasCode(err, errs.ContextInactive) {
		t.Fatalf("Await after the teardown returned %v; want CONTEXT_INACTIVE", err)
	}
	if !after || f.State() != dshctx.StateDisposed || scope.Fiber().State() != dshctx.StateDisposed {
		t.Fatalf("teardown incomplete: later disposer ran=%v, fiber %s, scope %s", after, f.State(), scope.Fiber().State())
	}
}

func TestCtxDisposerSeesTheCallersDeadline(t *testing.T) {
	root, _ := newRoot(t)
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := stdctx.WithDeadline(stdctx.Background(), deadline)
	defer cancel()
	var got time.Time
	f := mustPlugin(t, root, dshctx.Define("p", func(c *dshctx.Context, _ any) error {
		_, err := c.OnDisposeCtx("final write", func(ctx stdctx.Context) error {
			got, _ = ctx.Deadline()
			return ctx.Err()
		})
		return err
	}))
	if err := f.Dispose(ctx); err != nil {
		t.Fatal(err)
	}
	if !got.Equal(deadline) {
		t.Fatalf("the disposer saw deadline %v; want %v", got, deadline)
	}
}

func TestCtxDisposerStopsAtTheDeadline(t *testing.T) {
	root, _ := newRoot(t)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	f := mustPlugin(t, root, dshctx.Define("p", func(c *dshctx.Context, _ any) error {
		_, err := c.OnDisposeCtx("final write", func(ctx stdctx.Context) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		})
		return err
	}))
	// Either the disposer's own error or the timeout wins the race; both
	// carry the caller's cancellation.
	if err := f.Dispose(ctx); !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("Dispose returned %v; want the cancellation", err)
	}
	if err := f.Await(stdctx.Background()); !errs.HasCode(err, errs.ContextInactive) {
		t.Fatalf("Await returned %v", err)
	}
}

func TestDisposeTimeoutWhileApplyRunsNamesTheApply(t *testing.T) {
	root, _ := newRoot(t)
	entered, release := make(chan struct{}), make(chan struct{})
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		mustPlugin(t, root, dshctx.Define("slow", func(*dshctx.Context, any) error {
			close(entered)
			<-release
			return nil
		}))
	}()
	<-entered
	f := root.Fiber().Children()[0]
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	cancel()
	err := f.Dispose(ctx)
	if !errs.Has(err, errs.ContextInactive, "context/dispose-timeout") || !strings.Contains(err.Error(), `the Apply of fiber "slow"`) {
		t.Fatalf("Dispose returned %v; want a timeout naming the Apply", err)
	}
	close(release)
	<-applied
	// The Apply succeeded, but the fiber is on its way out: Await must not
	// report it active.
	if err := f.Await(stdctx.Background()); !errs.HasCode(err, errs.ContextInactive) {
		t.Fatalf("Await returned %v; want CONTEXT_INACTIVE once disposed", err)
	}
	if st := f.State(); st != dshctx.StateDisposed {
		t.Fatalf("state %s; want disposed", st)
	}
}
