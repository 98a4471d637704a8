package plugin

import (
	"fmt"
	"reflect"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

// None is the config of a plugin that takes none: a config entry that gives
// one anyway is a config error.
type None = struct{}

// ReasonInvalidConfig marks an Apply refused because the config failed the
// type's Validate, or was not of the plugin's config type.
const ReasonInvalidConfig = "plugin/invalid-config"

// Defaulter is implemented by a config type whose zero value is not its
// default. The host decodes an entry's config over Defaults(), so keys the
// entry leaves out keep their default; a Go caller that applies the plugin
// with a nil config gets Defaults() too.
type Defaulter[C any] interface {
	Defaults() C
}

// Validator is implemented by a config type that has rules beyond its
// field types. Validate runs at config check (its message lands on the
// entry's file:line) and again when the plugin is applied, so a Go caller
// cannot bypass it.
type Validator interface {
	Validate() error
}

// Plugin is a registered plugin with config type C. It is a dshctx.Plugin,
// so tests and embedders apply it directly: ctx.Plugin(p, C{...}).
type Plugin[C any] struct {
	id     string
	apply  func(*dshctx.Context, C) error
	inject []dshctx.ServiceKey
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
// Like database/sql.Register it panics on a malformed or duplicate id or a
// nil apply: that is a defect of the binary, found the first time it starts.
func Register[C any](id, doc string, apply func(*dshctx.Context, C) error, inject ...dshctx.ServiceKey) *Plugin[C] {
	if apply == nil {
		panic(fmt.Sprintf("plugin.Register: plugin %q has a nil apply function", id))
	}
	p := &Plugin[C]{id: id, apply: apply, inject: inject}
	info := Info{ID: id, Doc: doc, Plugin: p}
	if !takesNone[C]() {
		info.Config = func() any { c := defaults[C](); return &c }
	}
	add(info)
	return p
}

// Name is the plugin's id; its fibers are named after it.
func (p *Plugin[C]) Name() string { return p.id }

// Inject lists the services the plugin needs.
func (p *Plugin[C]) Inject() []dshctx.ServiceKey { return p.inject }

// Apply implements dshctx.Plugin. config is a C, a *C (what the host
// decodes entries into) or nil, which means C's defaults.
func (p *Plugin[C]) Apply(ctx *dshctx.Context, config any) error {
	cfg, err := p.config(config)
	if err != nil {
		return err
	}
	return p.apply(ctx, cfg)
}

func (p *Plugin[C]) config(config any) (C, error) {
	cfg, err := p.convert(config)
	if err != nil {
		return cfg, err
	}
	if err := validate(&cfg); err != nil {
		return cfg, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("%s: the config is invalid; fix the entry's config", p.id)).
			WithReason(ReasonInvalidConfig)
	}
	return cfg, nil
}

// convert accepts the forms a config reaches Apply in; see Apply.
func (p *Plugin[C]) convert(config any) (C, error) {
	var cfg C
	switch c := config.(type) {
	case nil:
		cfg = defaults[C]()
	case C:
		cfg = c
	case *C:
		if c == nil {
			cfg = defaults[C]()
		} else {
			cfg = *c
		}
	default:
		return cfg, errs.New(errs.InvalidArgument, fmt.Sprintf(
			"%s: the config is a %T; pass a %s, a pointer to one, or nil for the defaults", p.id, config, typeName[C]())).
			WithReason(ReasonInvalidConfig)
	}
	return cfg, nil
}

// defaults returns C's Defaults, or the zero C.
func defaults[C any]() C {
	var zero C
	if d, ok := any(zero).(Defaulter[C]); ok {
		return d.Defaults()
	}
	if d, ok := any(&zero).(Defaulter[C]); ok {
		return d.Defaults()
	}
	return zero
}

// validate calls Validate whether C declares it on the value or the pointer.
func validate[C any](c *C) error {
	if v, ok := any(*c).(Validator); ok {
		return v.Validate()
	}
	if v, ok := any(c).(Validator); ok {
		return v.Validate()
	}
	return nil
}

func takesNone[C any]() bool {
	return reflect.TypeFor[C]() == reflect.TypeFor[None]()
}

func typeName[C any]() string { return reflect.TypeFor[C]().String() }
