package agentcontroller

import (
	stdctx "context"
	"fmt"
	"sync"

	"github.com/dsh-go/dsh/errs"
)

// ReasonHeld goes with RejectedCode when a delivery waited for a hold of
// the admission stage (a config reload replacing admission plugins) longer
// than the hold's limit. Nothing was checked and nothing entered the inbox;
// sending the message again once the reload is over is safe.
const ReasonHeld = "agent-controller/admission-held"

// HoldDrainTimeout is the code Hold returns when decisions that began
// before the hold were still running when its ctx ended.
const HoldDrainTimeout errs.Code = "AGENT_CONTROLLER_HOLD_DRAIN_TIMEOUT"

// gate lets a hold pause the admission stage. Why a hold and not Caddy's
// order (start the new plugin before stopping the old): admission plugins
// keep state — a rate limiter's counts, an inbox limit's view — and two
// instances side by side would count every message twice or disagree, so
// the host swaps them one after the other and holds deliveries in between.
type gate struct {
	mu       sync.Mutex
	held     *hold
	inflight int
	waiting  int // deliveries waiting for a release, for tests
	// drained is closed when inflight reaches zero while a hold waits.
	drained chan struct{}
}

type hold struct {
	released chan struct{}
	// limit ends the hold for the deliveries waiting on it: they are
	// refused with ReasonHeld, never admitted unchecked.
	limit stdctx.Context
}

// Hold pauses admission until release is called: a delivery that reaches
// the admission stage meanwhile waits — bounded by its own ctx — and is
// decided once released by the listeners then in place. Decisions already
// running finish first: Hold returns once they did, or when ctx ends, with
// HoldDrainTimeout (those decisions then finish with the listeners they
// began with). When ctx ends before release, waiting and later deliveries
// are refused with ReasonHeld until release. Holds do not nest: a second
// Hold waits for the first to be released, or fails when ctx ends.
func (c *Controller) Hold(ctx stdctx.Context) (release func(), err error) {
	g := &c.gate
	h := &hold{released: make(chan struct{}), limit: ctx}
	g.mu.Lock()
	for g.held != nil {
		other := g.held
		g.mu.Unlock()
		select {
		case <-other.released:
		case <-ctx.Done():
			return nil, errs.Wrap(HoldDrainTimeout, ctx.Err(), "the admission stage is already held by another reload, which did not end in time; retry the reload")
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
				"%d admission decisions begun before the hold were still running when its deadline passed; they finish with the listeners they began with", n))
		}
	}
	return release, nil
}

// enter waits until admission is not held and counts the caller as a
// decision in flight; leave must follow. signal is the delivery's.
func (c *Controller) enter(signal stdctx.Context) error {
	g := &c.gate
	g.mu.Lock()
	for g.held != nil {
		h := g.held
		if h.limit.Err() != nil {
			g.mu.Unlock()
			return held()
		}
		g.waiting++
		g.mu.Unlock()
		err := c.waitRelease(signal, h)
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

func (c *Controller) waitRelease(signal stdctx.Context, h *hold) error {
	select {
	case <-h.released:
		return nil
	case <-h.limit.Done():
		return held()
	case <-signal.Done():
		if c.stop.Err() != nil {
			return stopped()
		}
		return stdctx.Cause(signal)
	}
}

func (c *Controller) leave() {
	g := &c.gate
	g.mu.Lock()
	g.inflight--
	if g.inflight == 0 && g.drained != nil {
		close(g.drained)
		g.drained = nil
	}
	g.mu.Unlock()
}

func held() *errs.Error {
	return expiredRefusal(ReasonHeld,
		"the message waited for a config reload that replaces admission plugins longer than the reload's limit, and was not delivered; send it again under a new request_id", false)
}
