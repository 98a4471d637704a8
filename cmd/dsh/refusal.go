package main

import (
	"errors"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/sessions"
)

// refusalText is what the user reads about a refused message: the refusal,
// and when admission itself failed (a plugin timed out, crashed, panicked
// or broke the protocol), the cause, which names the plugin — "the
// admission check failed" alone leaves nothing to fix.
func refusalText(err error, ref sessions.Refusal) string {
	e, ok := errors.AsType[*errs.Error](err)
	for ok && e.Code != sessions.RejectedCode {
		e, ok = errors.AsType[*errs.Error](e.Cause)
	}
	if !ok || e.Cause == nil {
		return ref.Message
	}
	return ref.Message + ": " + e.Cause.Error()
}
