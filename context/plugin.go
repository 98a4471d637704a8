package context

import (
	"fmt"

	"github.com/dsh-go/dsh/errs"
)

// Plugin is the unit of behaviour mounted on the tree. Apply runs inside a
// fresh fiber; everything it registers through ctx belongs to that fiber and
// is undone when the fiber is disposed or unloaded.
//
// Apply may be called more than once over a fiber's life: a plugin whose
// injected service goes away is unloaded and applied again with a new ctx when
// a provider returns. It should therefore keep no state outside what it
// registers through ctx.
type Plugin interface {
	Apply(ctx *Context, config any) error
}

// Named is implemented by plugins that have a name worth logging. Without it
// the fiber is named after the plugin's Go type.
type Named interface {
	Name() string
}

// Injector is implemented by plugins that depend on services. The plugin is
// applied only while every listed key has an active provider.
type Injector interface {
	Inject() []ServiceKey
}

// PluginFunc adapts a function to Plugin.
type PluginFunc func(ctx *Context, config any) error

// Apply calls f.
func (f PluginFunc) Apply(ctx *Context, config any) error { return f(ctx, config) }

// Define builds a plugin from a name, its injected keys and an apply function;
// it saves a type declaration for small plugins and tests.
func Define(name string, apply func(ctx *Context, config any) error, inject ...ServiceKey) Plugin {
	return &defined{name: name, apply: apply, inject: inject}
}

type defined struct {
	name   string
	apply  func(ctx *Context, config any) error
	inject []ServiceKey
}

func (d *defined) Apply(ctx *Context, config any) error { return d.apply(ctx, config) }
func (d *defined) Name() string                         { return d.name }
func (d *defined) Inject() []ServiceKey                 { return d.inject }

// ConfigAs returns a plugin's config as a T. It accepts a T, a *T (what the
// host decodes entries into) and nil, which gives the zero T; anything else
// is an error naming the plugin and the type it wants.
func ConfigAs[T any](plugin string, config any) (T, error) {
	var zero T
	switch c := config.(type) {
	case nil:
		return zero, nil
	case T:
		return c, nil
	case *T:
		if c == nil {
			return zero, nil
		}
		return *c, nil
	}
	return zero, errs.New(errs.InvalidArgument, fmt.Sprintf("%s: config is a %T; want a %T", plugin, config, zero))
}
