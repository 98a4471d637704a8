package agentloop

import "github.com/dsh-go/dsh/services/session"

// RecordEvent has the driver append ev, an event outside the history
// such as a goal record (session.GoalRecorded), the way RecordRefusal
// does: an idle agent's driver appends it and makes it durable at once,
// a running turn's at its end. A disposed agent records nothing and says
// so with AGENT_DISPOSED.
func (a *ReactLoopAgent) RecordEvent(ev session.Event) error { return a.RecordRefusal(ev) }
