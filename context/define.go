package context

import (
	"fmt"
	"reflect"

	"github.com/dsh-go/dsh/errs"
)

// ReasonInvalidConfig marks an Apply refused because its config was not of
// the plugin's config type or failed the type's Validate.
const ReasonInvalidConfig = "plugin/invalid-config"

// None is the config type of a plugin that takes none: Apply refuses any
// config but nil or a None.
type None = struct{}

// Defaulter is implemented by a config type whose zero value is not its
// default: a nil config means Defaults(), and the host decodes an entry's
// config over it, so keys the entry leaves out keep their default.
type Defaulter[C any] interface {
	Defaults() C
}

// Validator is implemented by a config type that has rules beyond its
// field types. Validate runs every time the plugin is applied, so no caller
// can bypass it; the host also runs it when it checks a config file.
type Validator interface {
	Validate() error
}

// Defined is a plugin with a name, a typed config C and the services it
// injects; Define builds one. Core services and registered plugins
// (package plugin builds on it) are all Defined, so a config reaches every
// apply function through the one conversion in Config.
type Defined[C any] struct {
	name   string
	apply  func(*Context, C) error
	inject []ServiceKey
}

// Define builds a plugin called name whose apply gets its config as a C.
// A caller applies it with a C, a *C, or nil for C's defaults; anything
// else is refused before apply runs, with INVALID_ARGUMENT and reason
// ReasonInvalidConfig naming the plugin and C. inject lists the services
// apply reads: the plugin is applied only while each has a provider.
//
// Use None for a plugin without config. Define panics on a nil apply, a
// defect of the binary found the first time it starts.
func Define[C any](name string, apply func(ctx *Context, cfg C) error, inject ...ServiceKey) *Defined[C] {
	if apply == nil {
		panic(fmt.Sprintf("Define: plugin %q has a nil apply function", name))
	}
	return &Defined[C]{name: name, apply: apply, inject: inject}
}

// Name is the plugin's name; its fibers are named after it.
func (d *Defined[C]) Name() string { return d.name }

// Inject lists the services the plugin needs.
func (d *Defined[C]) Inject() []ServiceKey { return d.inject }

// Apply implements Plugin: it converts and validates config (see Config),
// then runs the apply function with it. A config Context.Plugin checked
// already is not checked again, on this apply or a later re-apply:
// Validate may be costly (compiling patterns) and its answer cannot change.
func (d *Defined[C]) Apply(ctx *Context, config any) error {
	if c, ok := config.(checked[C]); ok {
		return d.apply(ctx, c.cfg)
	}
	cfg, err := d.Config(config)
	if err != nil {
		return err
	}
	return d.apply(ctx, cfg)
}

// Config returns config as the C that apply would get: converted (see
// Convert) and validated. Its errors are the ones Apply returns.
func (d *Defined[C]) Config(config any) (C, error) {
	cfg, err := d.Convert(config)
	if err != nil {
		return cfg, err
	}
	if err := validate(&cfg); err != nil {
		return cfg, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("%s: the config is invalid; correct the config given to %s", d.name, d.name)).
			WithReason(ReasonInvalidConfig)
	}
	return cfg, nil
}

// Convert returns config as a C without validating it: a C as is, a *C
// dereferenced, nil (or a nil *C) as C's defaults.
func (d *Defined[C]) Convert(config any) (C, error) {
	switch c := config.(type) {
	case nil:
		return defaults[C](), nil
	case C:
		return c, nil
	case *C:
		if c == nil {
			return defaults[C](), nil
		}
		return *c, nil
	}
	var zero C
	if reflect.TypeFor[C]() == reflect.TypeFor[None]() {
		return zero, errs.New(errs.InvalidArgument, fmt.Sprintf(
			"%s: takes no config, but was given one of type %T; pass nil", d.name, config)).WithReason(ReasonInvalidConfig)
	}
	want := reflect.TypeFor[C]()
	return zero, errs.New(errs.InvalidArgument, fmt.Sprintf(
		"%s: the config has type %T; pass %s, *%s or nil (the defaults)", d.name, config, want, want)).
		WithReason(ReasonInvalidConfig)
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

// defined is a Defined of any config type: Context.Plugin checks its
// config before making a fiber, and notInjected knows where its keys go.
type defined interface {
	check(config any) (any, error)
}

// checked is a config that check converted and validated for a
// Defined[C]; the fiber keeps it in place of what the caller handed over.
type checked[C any] struct{ cfg C }

func (d *Defined[C]) check(config any) (any, error) {
	cfg, err := d.Config(config)
	if err != nil {
		return nil, err
	}
	return checked[C]{cfg}, nil
}
