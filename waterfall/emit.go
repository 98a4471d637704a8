package waterfall

import (
	stdctx "context"

	dshctx "github.com/dsh-go/dsh/context"
)

// EmitListener hears a notification. Its error is logged, never returned to
// the emitter.
type EmitListener[P any] func(ctx stdctx.Context, p P) error

// Emit is a typed notification event. Declare it once as a package variable.
type Emit[P any] struct {
	name  string
	local *dshctx.Local[store[EmitListener[P]]]
}

// NewEmit declares a notification event.
func NewEmit[P any](name string) *Emit[P] {
	return &Emit[P]{name: name, local: dshctx.NewLocal(func() *store[EmitListener[P]] { return &store[EmitListener[P]]{} })}
}

// Name returns the event name.
func (e *Emit[P]) Name() string { return e.name }

// On registers fn in ctx's fiber and scope.
func (e *Emit[P]) On(ctx *dshctx.Context, fn EmitListener[P], opts ...Option) (off func(), err error) {
	return register(ctx, e.local, e.name, fn, fn == nil, opts)
}

// Emit runs every listener for the tag of at, in order. A listener that fails
// or panics is logged with the event and its fiber; the others still run.
// The only error returned is for a bad call (nil at, unnamed event).
func (e *Emit[P]) Emit(ctx stdctx.Context, at *dshctx.Context, p P) error {
	if err := checkDispatch(e.name, at); err != nil {
		return err
	}
	ctx = orBackground(ctx)
	u, t := e.local.Get(at).lists(at.Tag())
	var i, j int32
	for {
		en, ni, nj, ok := merge(u, t, i, j)
		if !ok {
			return nil
		}
		i, j = ni, nj
		if err := e.invoke(ctx, en, p); err != nil {
			en.fiber.Logger().Error("listener failed", "event", e.name, "fiber", en.fiber.Name(), "error", err)
		}
	}
}

// Heard reports whether an Emit at at would reach a listener, so an
// emitter can skip building a payload nobody reads.
func (e *Emit[P]) Heard(at *dshctx.Context) bool {
	u, t := e.local.Get(at).lists(at.Tag())
	return len(u)+len(t) > 0
}

func (e *Emit[P]) invoke(ctx stdctx.Context, en *entry[EmitListener[P]], p P) (err error) {
	defer func() {
		if x := recover(); x != nil {
			err = panicError(e.name, en.fiber, x)
		}
	}()
	return en.fn(ctx, p)
}
