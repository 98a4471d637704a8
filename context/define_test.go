package context_test

import (
	stdctx "context"
	"errors"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

type limits struct{ Max int }

func (limits) Defaults() limits { return limits{Max: 3} }

func (l limits) Validate() error {
	if l.Max < 1 {
		return errors.New("max must be at least 1")
	}
	return nil
}

// named declares Validate on the pointer, which must count too.
type named struct{ Name string }

func (n *named) Validate() error {
	if n.Name == "" {
		return errors.New("name is empty")
	}
	return nil
}

// applyWith applies p with config in a fresh root and returns what the
// fiber ended with.
func applyWith(t *testing.T, p dshctx.Plugin, config any) error {
	t.Helper()
	root, _ := newRoot(t)
	f, err := root.Plugin(p, config)
	if err != nil {
		return err
	}
	return f.Await(stdctx.Background())
}

func TestDefineGivesApplyItsConfigTyped(t *testing.T) {
	var got []limits
	p := dshctx.Define("limited", func(_ *dshctx.Context, c limits) error { got = append(got, c); return nil })
	for _, config := range []any{nil, limits{Max: 1}, &limits{Max: 2}, (*limits)(nil)} {
		if err := applyWith(t, p, config); err != nil {
			t.Fatalf("config %#v: %v", config, err)
		}
	}
	want := []limits{{3}, {1}, {2}, {3}}
	if len(got) != len(want) {
		t.Fatalf("applied %d times, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("apply %d got %+v, want %+v (nil means the defaults)", i, got[i], want[i])
		}
	}
}

// TestDefineRefusesAConfigOfAnotherTypeBeforeApply: the mistake is
// reported with a code, the plugin's name and the type it takes, and apply
// never sees it.
func TestDefineRefusesAConfigOfAnotherTypeBeforeApply(t *testing.T) {
	ran := false
	typed := dshctx.Define("limited", func(*dshctx.Context, limits) error { ran = true; return nil })
	err := applyWith(t, typed, map[string]any{"max": 2})
	if !errs.Has(err, errs.InvalidArgument, dshctx.ReasonInvalidConfig) {
		t.Fatalf("want INVALID_ARGUMENT %s, got %v", dshctx.ReasonInvalidConfig, err)
	}
	for _, want := range []string{`limited: the config has type map[string]interface {}`, "pass context_test.limits, *context_test.limits or nil (the defaults)"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error should contain %q: %v", want, err)
		}
	}
	bare := dshctx.Define("bare", func(*dshctx.Context, dshctx.None) error { ran = true; return nil })
	err = applyWith(t, bare, "surprise")
	if !errs.Has(err, errs.InvalidArgument, dshctx.ReasonInvalidConfig) || !strings.Contains(err.Error(), "bare: takes no config, but was given one of type string; pass nil") {
		t.Fatalf("a plugin without config must refuse one; got %v", err)
	}
	if ran {
		t.Fatal("apply ran with a config of another type")
	}
	if err := applyWith(t, bare, dshctx.None{}); err != nil || !ran {
		t.Fatalf("None itself is a config a plugin without one takes: %v", err)
	}
}

func TestDefineValidatesBeforeApply(t *testing.T) {
	ran := false
	p := dshctx.Define("limited", func(*dshctx.Context, limits) error { ran = true; return nil })
	err := applyWith(t, p, limits{Max: 0})
	if !errs.Has(err, errs.InvalidArgument, dshctx.ReasonInvalidConfig) || !strings.Contains(err.Error(), "limited") || !strings.Contains(err.Error(), "max must be at least 1") {
		t.Fatalf("got %v", err)
	}
	if ran {
		t.Fatal("apply ran with an invalid config")
	}
	onPointer := dshctx.Define("named", func(*dshctx.Context, named) error { return nil })
	if err := applyWith(t, onPointer, named{}); !errs.Has(err, errs.InvalidArgument, dshctx.ReasonInvalidConfig) {
		t.Fatalf("a Validate on the pointer must run too; got %v", err)
	}
	if _, err := onPointer.Config(&named{Name: "x"}); err != nil {
		t.Fatalf("Config of a valid config: %v", err)
	}
}

func TestDefinePanicsOnANilApply(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"nothing"`) {
			t.Fatalf("want a panic naming the plugin, got %v", r)
		}
	}()
	dshctx.Define[dshctx.None]("nothing", nil)
}

// TestAWrongConfigFailsWhenGivenNotWhenApplied: a plugin waiting for a
// service that is not there yet would apply only later; its config is
// refused at the call that hands it over, with no fiber left pending.
func TestAWrongConfigFailsWhenGivenNotWhenApplied(t *testing.T) {
	root, _ := newRoot(t)
	waiting := dshctx.Define("waiting", func(*dshctx.Context, limits) error { return nil }, counterKey)
	f, err := root.Plugin(waiting, "max=2")
	if f != nil || !errs.Has(err, errs.InvalidArgument, dshctx.ReasonInvalidConfig) || !strings.Contains(err.Error(), "waiting: the config has type string") {
		t.Fatalf("Plugin returned fiber %v and error %v; want no fiber and the config error", f, err)
	}
	if _, err := root.Plugin(waiting, limits{Max: -1}); !errs.Has(err, errs.InvalidArgument, dshctx.ReasonInvalidConfig) || !strings.Contains(err.Error(), "max must be at least 1") {
		t.Fatalf("a config that fails Validate must be refused when given too; got %v", err)
	}
	f, err = root.Plugin(waiting, limits{Max: 2})
	if err != nil || f.State() != dshctx.StatePending {
		t.Fatalf("a good config waits for its service: %v, %v", f, err)
	}
}

// counted counts its Validate calls.
type counted struct{ calls *int }

func (c counted) Validate() error { *c.calls++; return nil }

// TestAConfigIsValidatedOnceForAllApplies: Validate can be costly (a
// permission config compiles its patterns), so the check at Plugin serves
// the first apply and every re-apply after a provider comes back.
func TestAConfigIsValidatedOnceForAllApplies(t *testing.T) {
	root, _ := newRoot(t)
	calls, applies := 0, 0
	dep := dshctx.Define("dep", func(ctx *dshctx.Context, c counted) error {
		applies++
		_, err := counterKey.Get(ctx)
		return err
	}, counterKey)
	if _, err := root.Plugin(dep, counted{calls: &calls}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		prov := mustPlugin(t, root, provider("prov", &counter{}))
		if err := prov.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
		if err := prov.Dispose(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if applies != 2 || calls != 1 {
		t.Fatalf("applied %d times (want 2) and validated %d times (want 1)", applies, calls)
	}
}
