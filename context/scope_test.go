package context_test

import (
	stdctx "context"
	"strings"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

// reader is a plugin that injects counterKey and records what it read on
// each apply.
func reader(name string, seen *[]*counter) dshctx.Plugin {
	return dshctx.Define(name, func(ctx *dshctx.Context, _ any) error {
		c, err := counterKey.Get(ctx)
		if err != nil {
			return err
		}
		*seen = append(*seen, c)
		return nil
	}, counterKey)
}

func last(seen []*counter) *counter {
	if len(seen) == 0 {
		return nil
	}
	return seen[len(seen)-1]
}

func TestOneProviderPluginServesEveryScopeItIsMountedIn(t *testing.T) {
	root, _ := newRoot(t)
	a, _ := root.Scoped("a")
	b, _ := root.Scoped("b")
	ca, cb := &counter{n: 1}, &counter{n: 2}
	var seenA, seenB []*counter
	depA := mustPlugin(t, a, reader("dep", &seenA))
	depB := mustPlugin(t, b, reader("dep", &seenB))
	// The same plugin, as a preset would mount it, once per scope.
	for _, at := range []struct {
		ctx *dshctx.Context
		c   *counter
	}{{a, ca}, {b, cb}} {
		c := at.c
		f := mustPlugin(t, at.ctx, dshctx.Define("prov", func(ctx *dshctx.Context, _ any) error {
			return counterKey.Provide(ctx, c)
		}))
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatalf("the second scope's provider failed: %v", err)
		}
	}
	if depA.State() != dshctx.StateActive || depB.State() != dshctx.StateActive {
		t.Fatalf("dependents: a %s, b %s", depA.State(), depB.State())
	}
	if last(seenA) != ca || last(seenB) != cb {
		t.Fatal("each scope's dependent must see its own scope's service")
	}
	if got, err := counterKey.Get(a); err != nil || got != ca {
		t.Fatalf("a's own context reads %v, %v", got, err)
	}
	// The root sees neither.
	_, err := counterKey.Get(root)
	wantCode(t, err, errs.ServiceUnavailable)
}

func TestWithdrawUnloadsOnlyTheDependentsOfThatScope(t *testing.T) {
	root, _ := newRoot(t)
	a, _ := root.Scoped("a")
	b, _ := root.Scoped("b")
	var seenA, seenB []*counter
	depA := mustPlugin(t, a, reader("depA", &seenA))
	depB := mustPlugin(t, b, reader("depB", &seenB))
	provA := mustPlugin(t, a, provider("provA", &counter{}))
	mustPlugin(t, b, provider("provB", &counter{}))
	provA.Dispose(stdctx.Background())
	if depA.State() != dshctx.StatePending {
		t.Fatalf("a's dependent must unload with a's provider, is %s", depA.State())
	}
	if depB.State() != dshctx.StateActive || len(seenB) != 1 {
		t.Fatalf("b's dependent must not notice a's provider going: %s, %d applies", depB.State(), len(seenB))
	}
}

func TestRootProviderAppliesToScopesUntilOneProvidesItsOwn(t *testing.T) {
	root, _ := newRoot(t)
	a, _ := root.Scoped("a")
	b, _ := root.Scoped("b")
	global, local := &counter{n: 1}, &counter{n: 2}
	var seenA, seenB []*counter
	mustPlugin(t, a, reader("depA", &seenA))
	mustPlugin(t, b, reader("depB", &seenB))
	mustPlugin(t, root, provider("global", global))
	if last(seenA) != global || last(seenB) != global {
		t.Fatal("scopes without a provider of their own must see the root's")
	}
	// A closer provider re-applies the dependents it shadows, and only them.
	provA := mustPlugin(t, a, provider("local", local))
	if last(seenA) != local || len(seenA) != 2 {
		t.Fatalf("a's dependent must be re-applied against a's provider: %d applies", len(seenA))
	}
	if len(seenB) != 1 {
		t.Fatalf("b's dependent was re-applied %d times", len(seenB)-1)
	}
	// When it goes, the dependent falls back to the root's.
	provA.Dispose(stdctx.Background())
	if last(seenA) != global || len(seenA) != 3 {
		t.Fatalf("a's dependent must fall back to the root's provider: %d applies", len(seenA))
	}
}

func TestSameScopeStillConflicts(t *testing.T) {
	root, _ := newRoot(t)
	a, _ := root.Scoped("a")
	mustPlugin(t, a, provider("first", &counter{}))
	err := mustPlugin(t, a, provider("second", &counter{})).Await(stdctx.Background())
	wantCode(t, err, errs.ServiceConflict)
	if !strings.Contains(err.Error(), `scope "a"`) {
		t.Fatalf("the conflict should name the scope: %v", err)
	}
}

// TestScopeContextReadsLikeCodeOutsidePlugins: an agent's scope is made by
// the agent loop's plugin, but code reading through it did not write that
// plugin and must not be held to its inject list.
func TestScopeContextReadsLikeCodeOutsidePlugins(t *testing.T) {
	root, _ := newRoot(t)
	mustPlugin(t, root, provider("prov", &counter{n: 7}))
	var agent *dshctx.Context
	loop := mustPlugin(t, root, dshctx.Define("loop", func(ctx *dshctx.Context, _ any) error {
		var err error
		agent, err = ctx.Scoped("agent-1")
		return err
	}))
	if err := loop.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if c, err := counterKey.Get(agent); err != nil || c.n != 7 {
		t.Fatalf("reading a root service through an agent's context: %v", err)
	}
}

func TestNotInjectedSaysWhereTheKeyGoes(t *testing.T) {
	root, _ := newRoot(t)
	mustPlugin(t, root, provider("prov", &counter{}))
	f := mustPlugin(t, root, dshctx.Define("forgetful", func(ctx *dshctx.Context, _ any) error {
		_, err := counterKey.Get(ctx)
		return err
	}))
	err := f.Await(stdctx.Background())
	wantCode(t, err, errs.ServiceNotInjected)
	if !errs.Has(err, errs.ServiceNotInjected, "context/not-injected") {
		t.Fatalf("missing reason: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{`"forgetful"`, `"counter"`, "inject arguments after apply"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error should contain %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "Inject method") {
		t.Fatalf("a Define plugin has no Inject method to edit: %s", msg)
	}
}

// TestScopeTeardownDoesNotReapplyItsDependents: when a scope goes, its
// provider is withdrawn while a dependent may still be pending in it; the
// root's provider must not bring that dependent back for a moment.
func TestScopeTeardownDoesNotReapplyItsDependents(t *testing.T) {
	root, _ := newRoot(t)
	mustPlugin(t, root, provider("global", &counter{}))
	a, _ := root.Scoped("a")
	var seen []*counter
	// The dependent comes first, so teardown withdraws the provider
	// before it disposes the dependent.
	dep := mustPlugin(t, a, reader("dep", &seen))
	mustPlugin(t, a, provider("local", &counter{}))
	applies := len(seen)
	a.Dispose(stdctx.Background())
	if len(seen) != applies {
		t.Fatalf("the dependent was re-applied %d times while its scope went away", len(seen)-applies)
	}
	if dep.State() != dshctx.StateDisposed {
		t.Fatalf("dep is %s", dep.State())
	}
}

// TestChildProviderDoesNotShadowItsParent: a plugin whose child provides
// the key it injects keeps the outer provider, instead of being unloaded —
// and its child with it — by its own child.
func TestChildProviderDoesNotShadowItsParent(t *testing.T) {
	root, _ := newRoot(t)
	outer, inner := &counter{n: 1}, &counter{n: 2}
	mustPlugin(t, root, provider("global", outer))
	a, _ := root.Scoped("a")
	var seen []*counter
	wrapper := mustPlugin(t, a, dshctx.Define("wrapper", func(ctx *dshctx.Context, _ any) error {
		c, err := counterKey.Get(ctx)
		if err != nil {
			return err
		}
		seen = append(seen, c)
		_, err = ctx.Plugin(provider("child", inner), nil)
		return err
	}, counterKey))
	if err := wrapper.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != outer || wrapper.State() != dshctx.StateActive {
		t.Fatalf("wrapper: %d applies, state %s", len(seen), wrapper.State())
	}
	// Everyone else in the scope sees the child's.
	if c, err := counterKey.Get(a); err != nil || c != inner {
		t.Fatalf("scope a reads %v, %v", c, err)
	}
}

func TestScopeReturnsTheEnclosingScopesContext(t *testing.T) {
	root, _ := newRoot(t)
	a, _ := root.Scoped("a")
	var inside *dshctx.Context
	mustPlugin(t, a, dshctx.Define("p", func(ctx *dshctx.Context, _ any) error {
		inside = ctx.Scope()
		return nil
	}))
	if inside != a || a.Scope() != a || root.Scope() != root {
		t.Fatal("Scope must return the nearest scope's own context")
	}
	a.Dispose(stdctx.Background())
	if a.Scope() != nil {
		t.Fatal("a disposed scope has no context to register through")
	}
}

func TestOwnProvidesOneServicePerScope(t *testing.T) {
	root, _ := newRoot(t)
	mustPlugin(t, root, provider("global", &counter{n: 1}))
	a, _ := root.Scoped("a")
	made := 0
	build := func() *counter { made++; return &counter{n: 2} }
	var inPlugin *counter
	f := mustPlugin(t, a, dshctx.Define("p", func(ctx *dshctx.Context, _ any) error {
		var err error
		inPlugin, err = counterKey.Own(ctx, build)
		return err
	}))
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	again, err := counterKey.Own(a, build)
	if err != nil || again != inPlugin || made != 1 {
		t.Fatalf("Own must reuse the scope's service: made %d, %v", made, err)
	}
	if local, ok := counterKey.Local(a); !ok || local != inPlugin {
		t.Fatal("Local must return the scope's own service")
	}
	// The service belongs to the scope, not to the plugin that asked first.
	f.Dispose(stdctx.Background())
	if local, ok := counterKey.Local(a); !ok || local != inPlugin {
		t.Fatal("the scope's service must outlive the plugin that made it")
	}
	a.Dispose(stdctx.Background())
	if c, _ := counterKey.Get(root); c.n != 1 {
		t.Fatal("the root keeps its own")
	}
}

// TestOwnInsideADependentDoesNotReapplyIt: a plugin in an agent's scope that
// injects the root's service and, later, makes the scope's own instance
// through a child must keep running: re-applying it would dispose the child
// that is still making the instance.
func TestOwnInsideADependentDoesNotReapplyIt(t *testing.T) {
	root, _ := newRoot(t)
	mustPlugin(t, root, provider("global", &counter{n: 1}))
	a, _ := root.Scoped("a")
	var parentCtx *dshctx.Context
	applies := 0
	parent := mustPlugin(t, a, dshctx.Define("parent", func(ctx *dshctx.Context, _ any) error {
		applies++
		parentCtx = ctx
		return nil
	}, counterKey))
	done := make(chan error, 1)
	go func() {
		child, err := parentCtx.Plugin(dshctx.Define("child", func(ctx *dshctx.Context, _ any) error {
			_, err := counterKey.Own(ctx, func() *counter { return &counter{n: 2} })
			return err
		}), nil)
		if err == nil {
			err = child.Await(stdctx.Background())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: the child's Own re-applied its own parent, which waits to dispose the child")
	}
	if applies != 1 || parent.State() != dshctx.StateActive {
		t.Fatalf("parent applied %d times, %s", applies, parent.State())
	}
	if c, _ := counterKey.Get(a); c.n != 2 {
		t.Fatal("the scope must read its own instance")
	}
}
