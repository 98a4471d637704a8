package agents

import (
	"errors"

	"github.com/dsh-go/dsh/errs"
)

// CancelledBy names who cancelled from a cancel's cause: its "by" detail
// when it carries one (the session controller sets it), else its text.
// The agent and the agent controller both record it on what a cancel
// drops, so the two records agree.
func CancelledBy(cause error) string {
	if cause == nil {
		return "unknown"
	}
	if e, ok := errors.AsType[*errs.Error](cause); ok {
		if by, ok := e.Details["by"].(string); ok && by != "" {
			return by
		}
	}
	return cause.Error()
}
