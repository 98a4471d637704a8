package waterfall

import (
	stdctx "context"

	dshctx "github.com/dsh-go/dsh/context"
)

// SerialListener answers a serial event. Returning the zero R passes the
// question to the next listener.
type SerialListener[P any, R comparable] func(ctx stdctx.Context, p P) (R, error)

// Serial is an event whose listeners run in order until one returns a
// non-zero result. Declare it once as a package variable.
type Serial[P any, R comparable] struct {
	name  string
	local *dshctx.Local[store[SerialListener[P, R]]]
}

// NewSerial declares a serial event.
func NewSerial[P any, R comparable](name string) *Serial[P, R] {
	return &Serial[P, R]{name: name, local: dshctx.NewLocal(func() *store[SerialListener[P, R]] { return &store[SerialListener[P, R]]{} })}
}

// Name returns the event name.
func (s *Serial[P, R]) Name() string { return s.name }

// On registers fn in ctx's fiber and scope.
func (s *Serial[P, R]) On(ctx *dshctx.Context, fn SerialListener[P, R], opts ...Option) (off func(), err error) {
	return register(ctx, s.local, s.name, fn, fn == nil, opts)
}

// Dispatch asks the listeners for the tag of at in order and returns the
// first non-zero result. An error or panic stops the dispatch and is
// returned; ctx is checked before each listener.
func (s *Serial[P, R]) Dispatch(ctx stdctx.Context, at *dshctx.Context, p P) (R, error) {
	var zero R
	if err := checkDispatch(s.name, at); err != nil {
		return zero, err
	}
	ctx = orBackground(ctx)
	u, t := s.local.Get(at).lists(at.Tag())
	var i, j int32
	for {
		en, ni, nj, ok := merge(u, t, i, j)
		if !ok {
			return zero, nil
		}
		i, j = ni, nj
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		r, err := s.invoke(ctx, en, p)
		if err != nil || r != zero {
			return r, err
		}
	}
}

func (s *Serial[P, R]) invoke(ctx stdctx.Context, en *entry[SerialListener[P, R]], p P) (r R, err error) {
	defer func() {
		if x := recover(); x != nil {
			var zero R
			r, err = zero, panicError(s.name, en.fiber, x)
		}
	}()
	return en.fn(ctx, p)
}
