package plugin

import (
	"fmt"
	"reflect"

	dshctx "github.com/dsh-go/dsh/context"
)

// None is the config of a plugin that takes none: a config entry that gives
// one anyway is a config error.
type None = dshctx.None

// ReasonInvalidConfig marks an Apply refused because the config failed the
// type's Validate, or was not of the plugin's config type.
const ReasonInvalidConfig = dshctx.ReasonInvalidConfig

// Defaulter is implemented by a config type whose zero value is not its
// default. The host decodes an entry's config over Defaults(), so keys the
// entry leaves out keep their default; a Go caller that applies the plugin
// with a nil config gets Defaults() too.
type Defaulter[C any] = dshctx.Defaulter[C]

// Validator is implemented by a config type that has rules beyond its
// field types. Validate runs at config check (its message lands on the
// entry's file:line) and again when the plugin is applied, so a Go caller
// cannot bypass it.
type Validator = dshctx.Validator

// Plugin is a registered plugin with config type C: a dshctx.Defined under
// its id, so it converts and validates its config exactly as a core
// service does, and tests and embedders apply it directly:
// ctx.Plugin(p, C{...}).
type Plugin[C any] struct {
	*dshctx.Defined[C]
}

// Register makes a plugin available to config entries under id and returns
// it. Assign the result to a package variable, so the plugin registers when
// its package is linked and Go callers can apply it:
//
//	var Plugin = plugin.Register("admission.max-pending", "refuses ...", apply, agents.Key)
//
// apply runs in a fresh fiber for every entry that uses id, with the
// entry's config decoded into a C (over C's Defaults, if it has them) and
// validated. inject lists the services apply needs: the plugin is applied
// only while each has a provider.
//
// Register is dshctx.Define plus the registry: the core services, which no
// config entry can mount, use Define alone.
//
// Like database/sql.Register it panics on a malformed or duplicate id or a
// nil apply: that is a defect of the binary, found the first time it starts.
func Register[C any](id, doc string, apply func(*dshctx.Context, C) error, inject ...dshctx.ServiceKey) *Plugin[C] {
	if apply == nil {
		panic(fmt.Sprintf("plugin.Register: plugin %q has a nil apply function", id))
	}
	p := &Plugin[C]{dshctx.Define(id, apply, inject...)}
	info := Info{ID: id, Doc: doc, Plugin: p}
	if !takesNone[C]() {
		info.Config = func() any { c := p.defaults(); return &c }
	}
	add(info)
	return p
}

// defaults is the config a nil gives: C's Defaults, or the zero C.
func (p *Plugin[C]) defaults() C {
	c, _ := p.Convert(nil)
	return c
}

func takesNone[C any]() bool {
	return reflect.TypeFor[C]() == reflect.TypeFor[None]()
}
