package sessions

import "github.com/dsh-go/dsh/services/agentloop"

// What an entry point reads of a TurnResult, re-exported so it can tell
// how a turn ended without importing the agent loop: a turn/end event's
// Reason is one of these, and its Error names the code of a turn that
// failed.
const (
	EndCompleted = agentloop.ReasonCompleted
	EndMaxTokens = agentloop.ReasonMaxTokens
	EndBudget    = agentloop.ReasonBudget
	EndAborted   = agentloop.ReasonAborted
	EndDisposed  = agentloop.ReasonDisposed
	EndError     = agentloop.ReasonError
)

// TooManySteps is the code a turn/end's Error names when the turn reached
// the agent's step limit.
const TooManySteps = agentloop.TooManySteps
