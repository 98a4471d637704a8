package plugin_test

import (
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
)

type modelConfig struct{ Name string }

func (modelConfig) Defaults() modelConfig { return modelConfig{Name: "fallback"} }

// Validate refuses every config, to show ProvidesModel does not need a
// valid one: config check reports the rule and still knows the name.
func (modelConfig) Validate() error { return errInvalid }

var errInvalid = errorString("always invalid")

type errorString string

func (e errorString) Error() string { return string(e) }

var (
	_ = plugin.Register("test.model", "a model provider", func(*dshctx.Context, modelConfig) error { return nil }).
		ProvidesModel(func(c modelConfig) string { return c.Name })
	_ = plugin.Register("test.store", "a session store", func(*dshctx.Context, plugin.None) error { return nil }).
		StoresSessions()
)

func TestDeclarationsReachTheRegistry(t *testing.T) {
	model, _ := plugin.Lookup("test.model")
	if model.Provider == nil || model.SessionStore {
		t.Fatalf("test.model: %+v", model)
	}
	for config, want := range map[any]string{
		&modelConfig{Name: "mine"}: "mine",
		modelConfig{Name: "mine"}:  "mine",
		nil:                        "fallback",
		"not a config":             "fallback",
	} {
		if got := model.Provider(config); got != want {
			t.Errorf("Provider(%#v) = %q, want %q", config, got, want)
		}
	}
	if got := model.Provider(model.Config()); got != "fallback" {
		t.Errorf("a fresh config must name the default provider; got %q", got)
	}
	store, _ := plugin.Lookup("test.store")
	if !store.SessionStore || store.Provider != nil {
		t.Fatalf("test.store: %+v", store)
	}
	if greeter, _ := plugin.Lookup("test.greeter"); greeter.SessionStore || greeter.Provider != nil {
		t.Fatal("a plugin declares nothing unless it says so")
	}
}
