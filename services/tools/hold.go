package tools

import (
	stdctx "context"
	"errors"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/holdgate"
)

// HoldDrainTimeout is the code Hold returns when approval decisions that
// began before the hold were still running when its ctx ended.
const HoldDrainTimeout errs.Code = "TOOLS_APPROVAL_HOLD_DRAIN_TIMEOUT"

// The approval stage is held as agentcontroller holds admission: a call
// decided while a reload swaps plugins would hear fewer policies than the
// config names (a policy.cel deny rule, a tools.permission rule being
// restarted) and could run unchecked. Only the root service's gate is
// used; an agent's service defers to it, so one hold covers every agent.
var approvalStage = holdgate.Stage{Name: "approval", Deciders: "policies", DrainTimeout: HoldDrainTimeout}

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
	return s.root().gate.Hold(ctx, approvalStage)
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
func enter(g *holdgate.Gate, ctx stdctx.Context) (refused error, err error) {
	err = g.Enter(ctx)
	var overran *holdgate.Overran
	if errors.As(err, &overran) {
		if overran.Cause != nil {
			return overran.Cause, nil
		}
		return errors.New("a config reload was replacing the approval policies and did not finish in time"), nil
	}
	return nil, err
}
