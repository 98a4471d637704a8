package plugin_test

import (
	stdctx "context"
	"errors"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type greeting struct {
	Word string
	Max  int
}

func (greeting) Defaults() greeting { return greeting{Word: "hello", Max: 3} }

func (g greeting) Validate() error {
	if g.Max < 1 {
		return errors.New("max must be at least 1")
	}
	return nil
}

// pointerRules declares Validate on the pointer, which must count too.
type pointerRules struct{ Name string }

func (p *pointerRules) Validate() error {
	if p.Name == "" {
		return errors.New("name is empty")
	}
	return nil
}

var (
	seen     []greeting
	key      = dshctx.NewKey[string]("test.plugin-key")
	greeter  = plugin.Register("test.greeter", "greets", func(_ *dshctx.Context, c greeting) error { seen = append(seen, c); return nil })
	bare     = plugin.Register("test.bare", "takes no config", func(*dshctx.Context, plugin.None) error { return nil })
	pointers = plugin.Register("test.pointer-rules", "validates on the pointer", func(*dshctx.Context, pointerRules) error { return nil })
	injects  = plugin.Register("test.injects", "needs a service", func(*dshctx.Context, plugin.None) error { return nil }, key)
)

func apply(t *testing.T, p dshctx.Plugin, config any) error {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	f, err := root.Plugin(p, config)
	if err != nil {
		return err
	}
	return f.Await(stdctx.Background())
}

func TestApplyTakesTheConfigTheWaysCallersHoldIt(t *testing.T) {
	seen = nil
	for _, config := range []any{nil, greeting{Word: "hi", Max: 1}, &greeting{Word: "hey", Max: 2}, (*greeting)(nil)} {
		if err := apply(t, greeter, config); err != nil {
			t.Fatalf("config %#v: %v", config, err)
		}
	}
	want := []greeting{{"hello", 3}, {"hi", 1}, {"hey", 2}, {"hello", 3}}
	if len(seen) != len(want) {
		t.Fatalf("applied %d times, want %d", len(seen), len(want))
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("apply %d got %+v, want %+v (nil means the defaults)", i, seen[i], want[i])
		}
	}
}

func TestApplyRefusesAConfigThatFailsValidate(t *testing.T) {
	seen = nil
	err := apply(t, greeter, greeting{Word: "hi"})
	if !errs.Has(err, errs.InvalidArgument, plugin.ReasonInvalidConfig) || !strings.Contains(err.Error(), "test.greeter") || !strings.Contains(err.Error(), "max must be at least 1") {
		t.Fatalf("got %v", err)
	}
	if len(seen) != 0 {
		t.Fatal("apply ran with an invalid config")
	}
	if err := apply(t, pointers, pointerRules{}); !errs.Has(err, errs.InvalidArgument, plugin.ReasonInvalidConfig) {
		t.Fatalf("a Validate on the pointer must run too; got %v", err)
	}
}

func TestApplyRefusesAConfigOfAnotherType(t *testing.T) {
	err := apply(t, greeter, map[string]any{"word": "hi"})
	if !errs.Has(err, errs.InvalidArgument, plugin.ReasonInvalidConfig) || !strings.Contains(err.Error(), "plugin_test.greeting") {
		t.Fatalf("got %v", err)
	}
	if err := apply(t, bare, 42); !errs.Has(err, errs.InvalidArgument, plugin.ReasonInvalidConfig) {
		t.Fatalf("a plugin without config must refuse one; got %v", err)
	}
}

func TestInfoGivesAFreshDefaultConfigToDecodeInto(t *testing.T) {
	info, ok := plugin.Lookup("test.greeter")
	if !ok || info.Doc != "greets" || info.Plugin != dshctx.Plugin(greeter) {
		t.Fatalf("Lookup: %+v %v", info, ok)
	}
	a, b := info.Config().(*greeting), info.Config().(*greeting)
	if a == b || *a != (greeting{"hello", 3}) {
		t.Fatalf("Config must return a new pointer holding the defaults; got %p %p %+v", a, b, *a)
	}
	if info, _ := plugin.Lookup("test.bare"); info.Config != nil {
		t.Fatal("a plugin registered with None must say it takes no config")
	}
}

func TestTheIDIsWrittenOnce(t *testing.T) {
	if greeter.Name() != "test.greeter" {
		t.Fatalf("fiber name %q", greeter.Name())
	}
	if got := injects.Inject(); len(got) != 1 || got[0].Name() != "test.plugin-key" {
		t.Fatalf("Inject: %v", got)
	}
}

func TestListIsSortedByID(t *testing.T) {
	var ids []string
	for _, info := range plugin.List() {
		ids = append(ids, info.ID)
	}
	want := []string{"test.bare", "test.greeter", "test.injects", "test.model", "test.pointer-rules", "test.store"}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("List: %v, want %v", ids, want)
	}
}

func TestRegisterPanicsOnADefectOfTheBinary(t *testing.T) {
	for name, register := range map[string]func(){
		"duplicate": func() {
			plugin.Register("test.greeter", "again", func(*dshctx.Context, plugin.None) error { return nil })
		},
		"malformed": func() {
			plugin.Register("Clock", "no namespace", func(*dshctx.Context, plugin.None) error { return nil })
		},
		"nil apply": func() { plugin.Register[plugin.None]("test.nil-apply", "", nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			register()
		}()
	}
}
