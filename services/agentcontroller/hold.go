package agentcontroller

import (
	stdctx "context"
	"errors"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/holdgate"
)

// ReasonHeld goes with RejectedCode when a delivery waited for a hold of
// the admission stage (a config reload replacing admission plugins) longer
// than the hold's limit. Nothing was checked and nothing entered the inbox;
// sending the message again once the reload is over is safe.
const ReasonHeld = "agent-controller/admission-held"

// HoldDrainTimeout is the code Hold returns when decisions that began
// before the hold were still running when its ctx ended.
const HoldDrainTimeout errs.Code = "AGENT_CONTROLLER_HOLD_DRAIN_TIMEOUT"

// Why a hold and not Caddy's order (start the new plugin before stopping
// the old): admission plugins keep state — a rate limiter's counts, an
// inbox limit's view — and two instances side by side would count every
// message twice or disagree, so the host swaps them one after the other
// and holds deliveries in between.
var admissionStage = holdgate.Stage{Name: "admission", Deciders: "listeners", DrainTimeout: HoldDrainTimeout}

// Hold pauses admission until release is called: a delivery that reaches
// the admission stage meanwhile waits — bounded by its own ctx — and is
// decided once released by the listeners then in place. Decisions already
// running finish first: Hold returns once they did, or when ctx ends, with
// HoldDrainTimeout (those decisions then finish with the listeners they
// began with). When ctx ends before release, waiting and later deliveries
// are refused with ReasonHeld until release. Holds do not nest: a second
// Hold waits for the first to be released, or fails when ctx ends.
func (c *Controller) Hold(ctx stdctx.Context) (release func(), err error) {
	return c.gate.Hold(ctx, admissionStage)
}

// enter waits until admission is not held and counts the caller as a
// decision in flight; leave must follow. signal is the delivery's.
func (c *Controller) enter(signal stdctx.Context) error {
	err := c.gate.Enter(signal)
	var overran *holdgate.Overran
	switch {
	case err == nil:
		return nil
	case errors.As(err, &overran) && overran.Cause != nil:
		// The stage was left closed (a reload lost a plugin): say why.
		return expiredRefusal(ReasonHeld, "the message was not delivered: "+overran.Cause.Error()+"; send it again under a new request_id once the config is whole", false)
	case errors.As(err, &overran):
		return held()
	case c.stop.Err() != nil:
		return stopped()
	default:
		return err
	}
}

func (c *Controller) leave() { c.gate.Leave() }

func held() *errs.Error {
	return expiredRefusal(ReasonHeld,
		"the message waited for a config reload that replaces admission plugins longer than the reload's limit, and was not delivered; send it again under a new request_id", false)
}
