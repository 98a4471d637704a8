package tools

import (
	stdctx "context"
	"errors"
	"fmt"
	"sync"

	"github.com/dsh-go/dsh/errs"
)

// HoldDrainTimeout is the code Hold returns when approval decisions that
// began before the hold were still running when its ctx ended.
const HoldDrainTimeout errs.Code = "TOOLS_APPROVAL_HOLD_DRAIN_TIMEOUT"

// gate lets a config reload pause the approval stage while it swaps
// plugins, as agentcontroller's gate pauses admission: a call decided in
// between would hear fewer policies than the config names (a policy.cel
// deny rule, a tools.permission rule being restarted) and could run
// unchecked. Only the root service's gate is used; an agent's service
// defers to it, so one hold covers every agent.
type gate struct {
	mu       sync.Mutex
	held     *hold
	inflight int
	// drained is closed when inflight reaches zero while a hold waits.
	drained chan struct{}
}

type hold struct {
	released chan struct{}
	// limit ends the hold for the calls waiting on it: they are refused,
	// never decided by the policies that happen to be in place.
	limit stdctx.Context
}

// Hold pauses the approval stage (tools/approve) until release is called:
// a call that reaches it meanwhile waits — bounded by its own ctx — and is
// decided once released by the policies then in place. Decisions already
// running finish first: Hold returns once they did, or when ctx ends, with
// HoldDrainTimeout (those decisions then finish with the policies they
// began with). When ctx ends before release, waiting and later calls are
// refused — they do not run, and the model is told to retry — until
// release; a ctx cancelled with a cause (context.WithCancelCause) gives
// the refusals that cause as their reason. Holds do not nest: a second Hold waits for the first to be
// released, or fails when ctx ends. An Ask already put to a person is not
// a decision in flight: the policies have spoken, only the answer waits.
//
// Hold on an agent's service holds the root's stage, which covers every
// agent.
func (s *Service) Hold(ctx stdctx.Context) (release func(), err error) {
	g := &s.root().gate
	h := &hold{released: make(chan struct{}), limit: ctx}
	g.mu.Lock()
	for g.held != nil {
		other := g.held
		g.mu.Unlock()
		select {
		case <-other.released:
		case <-ctx.Done():
			return nil, errs.Wrap(HoldDrainTimeout, ctx.Err(), "the approval stage is already held by another reload, which did not end in time; retry the reload")
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
			return release, errs.Wrap(HoldDrainTimeout, ctx.Err(), fmt.Sprintf(
				"%d approval decisions begun before the hold were still running when its deadline passed; they finish with the policies they began with", n))
		}
	}
	return release, nil
}

// root returns the service of the root scope, whose gate every agent's
// calls pass.
func (s *Service) root() *Service {
	for s.parent != nil {
		s = s.parent
	}
	return s
}

// enter waits until the approval stage is not held and counts the caller
// as a decision in flight; leave must follow when both results are nil.
// refused is why a hold whose limit ended refuses the call.
func (g *gate) enter(ctx stdctx.Context) (refused error, err error) {
	g.mu.Lock()
	for g.held != nil {
		h := g.held
		if h.limit.Err() != nil {
			g.mu.Unlock()
			return h.why(), nil
		}
		g.mu.Unlock()
		select {
		case <-h.released:
		case <-h.limit.Done():
			return h.why(), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		g.mu.Lock()
	}
	g.inflight++
	g.mu.Unlock()
	return nil, nil
}

// why says why a hold past its limit refuses calls: the cause its limit
// was cancelled with (a reload that could not restore every policy says
// so), else that the reload overran its time.
func (h *hold) why() error {
	if c := stdctx.Cause(h.limit); c != nil && !errors.Is(c, stdctx.Canceled) && !errors.Is(c, stdctx.DeadlineExceeded) {
		return c
	}
	return errors.New("a config reload was replacing the approval policies and did not finish in time")
}

func (g *gate) leave() {
	g.mu.Lock()
	g.inflight--
	if g.inflight == 0 && g.drained != nil {
		close(g.drained)
		g.drained = nil
	}
	g.mu.Unlock()
}
