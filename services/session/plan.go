package session

import (
	"github.com/dsh-go/dsh/waterfall"
)

// PlanUpdated records the plan state of the session after a change: plan
// mode entered or left, a plan proposed, edited, approved or rejected, the
// todo list rewritten. Plan holds the whole state, not the change, so the
// last plan/updated event of a log is the state a resume starts from. It
// is not part of the history: the model learns of the plan through its
// tools' results.
const PlanUpdated Type = "plan/updated"

// Todo statuses.
const (
	TodoPending    = "pending"
	TodoInProgress = "in_progress"
	TodoCompleted  = "completed"
)

// Todo is one item of a session's todo list.
type Todo struct {
	ID     string `json:"id"`
	Text   string `json:"text"`
	Status string `json:"status"`
}

// PlanState is the plan state of a session: whether it is in plan mode,
// the plan the model proposed (Markdown, perhaps edited by the user) and
// the todo list.
type PlanState struct {
	// Planning: the session is in plan mode, where the tools service
	// refuses every call that is not read-only.
	Planning bool `json:"planning"`
	// Plan is the latest plan, Markdown; "" before any.
	Plan string `json:"plan,omitempty"`
	// PlanStatus is proposed, edited, approved or rejected ("" before a
	// plan).
	PlanStatus string `json:"plan_status,omitempty"`
	// Todos is the todo list, in the model's order.
	Todos []Todo `json:"todos,omitempty"`
	// Change says what the event changed: entered, left, proposed,
	// edited, approved, rejected or todos.
	Change string `json:"change,omitempty"`
	// By says who made the change: the model, a person through an entry
	// point (cli, acp, api), a preset.
	By string `json:"by,omitempty"`
}

// Clone returns a copy sharing nothing with s.
func (s PlanState) Clone() PlanState {
	s.Todos = append([]Todo(nil), s.Todos...)
	return s
}

// Record is the payload of session/record: an event for the agent's
// session that a plugin hands to the agent's driver, the one goroutine
// that appends to it. The driver appends it with the records of the
// decisions (before the next tool result or prompt, or at once when idle)
// and makes it durable with them; Turn and Step are the driver's.
type Record struct {
	AgentID string
	Event   Event
}

// EventRecord asks the agent loop to append an event to an agent's
// session; see Record. Emitted in the agent's scope.
var EventRecord = waterfall.NewEmit[Record]("session/record")
