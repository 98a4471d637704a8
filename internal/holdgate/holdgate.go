// Package holdgate pauses a decision stage while a config reload swaps
// the plugins that decide in it. The agent controller's admission stage
// and the tools service's approval stage both use it: a message or a call
// decided in the middle of a swap would hear fewer deciders than the
// config names, and could pass unchecked.
//
// A Gate counts the decisions in flight. Hold waits for them to finish
// and makes later ones wait until it is released; a hold whose limit
// ends refuses the waiting and later ones instead of letting them through.
package holdgate

import (
	stdctx "context"
	"errors"
	"fmt"
	"sync"

	"github.com/dsh-go/dsh/errs"
)

// Gate is one stage's hold. The zero value is open.
type Gate struct {
	mu       sync.Mutex
	held     *hold
	inflight int
	waiting  int
	// drained is closed when inflight reaches zero while a hold waits.
	drained chan struct{}
}

type hold struct {
	released chan struct{}
	// limit ends the hold for the decisions waiting on it: they are
	// refused, never decided by the deciders that happen to be in place.
	limit stdctx.Context
}

// Stage names a gated stage in Hold's errors: what it decides
// ("admission", "approval") and who decides it ("listeners",
// "policies"), and the code of a hold that could not drain in time.
type Stage struct {
	Name, Deciders string
	DrainTimeout   errs.Code
}

// Hold pauses the stage until release is called. Decisions already
// running finish first: Hold returns once they did, or when ctx ends,
// with st.DrainTimeout (those decisions then finish with the deciders
// they began with; release must still be called). When ctx ends before
// release, waiting and later decisions are refused (Enter returns
// *Overran) until release. Holds do not nest: a second Hold waits for the
// first to be released, or fails when ctx ends.
func (g *Gate) Hold(ctx stdctx.Context, st Stage) (release func(), err error) {
	h := &hold{released: make(chan struct{}), limit: ctx}
	g.mu.Lock()
	for g.held != nil {
		other := g.held
		g.mu.Unlock()
		select {
		case <-other.released:
		case <-ctx.Done():
			return nil, errs.Wrap(st.DrainTimeout, ctx.Err(), fmt.Sprintf(
				"the %s stage is already held by another reload, which did not end in time; retry the reload", st.Name))
		}
		g.mu.Lock()
	}
	g.held = h
	var drained chan struct{}
	if g.inflight > 0 {
		drained = make(chan struct{})
		g.drained = drained
	}
	n := g.inflight
	g.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			g.mu.Lock()
			g.held, g.drained = nil, nil
			g.mu.Unlock()
			close(h.released)
		})
	}
	if drained != nil {
		select {
		case <-drained:
		case <-ctx.Done():
			return release, errs.Wrap(st.DrainTimeout, ctx.Err(), fmt.Sprintf(
				"%d %s decisions begun before the hold were still running when its deadline passed; they finish with the %s they began with", n, st.Name, st.Deciders))
		}
	}
	return release, nil
}

// Overran is Enter's answer when the hold it waited on ended by its
// limit: the decision must be refused, not made.
type Overran struct {
	// Cause is what the hold's limit was cancelled with
	// (context.WithCancelCause), nil when it was plainly cancelled or ran
	// out of time.
	Cause error
}

func (o *Overran) Error() string {
	if o.Cause != nil {
		return o.Cause.Error()
	}
	return "a config reload held the stage longer than its limit"
}

// Enter waits until the stage is not held and counts the caller as a
// decision in flight; Leave must follow when it returns nil. It returns
// *Overran when the hold's limit ended, or the cause of ctx when ctx
// ended first.
func (g *Gate) Enter(ctx stdctx.Context) error {
	g.mu.Lock()
	for g.held != nil {
		h := g.held
		if h.limit.Err() != nil {
			g.mu.Unlock()
			return h.overran()
		}
		g.waiting++
		g.mu.Unlock()
		var err error
		select {
		case <-h.released:
		case <-h.limit.Done():
			err = h.overran()
		case <-ctx.Done():
			err = stdctx.Cause(ctx)
		}
		g.mu.Lock()
		g.waiting--
		if err != nil {
			g.mu.Unlock()
			return err
		}
	}
	g.inflight++
	g.mu.Unlock()
	return nil
}

func (h *hold) overran() *Overran {
	if c := stdctx.Cause(h.limit); c != nil && !errors.Is(c, stdctx.Canceled) && !errors.Is(c, stdctx.DeadlineExceeded) {
		return &Overran{Cause: c}
	}
	return &Overran{}
}

// Leave ends a decision Enter counted.
func (g *Gate) Leave() {
	g.mu.Lock()
	g.inflight--
	if g.inflight == 0 && g.drained != nil {
		close(g.drained)
		g.drained = nil
	}
	g.mu.Unlock()
}

// Waiting is the number of decisions waiting for a release.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// Held reports whether a hold is in place.
func (g *Gate) Held() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held != nil
}
