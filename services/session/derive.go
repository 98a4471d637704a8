package session

import "github.com/dsh-go/dsh/services/llm"

// deriver turns a log into the history, event by event, the same way live
// and on replay. Besides Derive's rule it answers, when a turn starts, the
// tool calls an earlier turn left without a result: logs written before
// resumes closed interrupted turns hold such gaps, and a provider refuses a
// history with an unanswered call.
type deriver struct {
	log  llm.Log
	open []string // calls of the last assistant message still unanswered
}

func (d *deriver) apply(e Event) {
	switch e.Type {
	case TurnStart:
		for _, id := range d.open {
			d.log.Append(llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: InterruptedResult, IsError: true})
		}
		d.open = nil
	case AssistantMessage:
		d.open = nil
		if e.Message != nil {
			for _, c := range e.Message.ToolCalls {
				d.open = append(d.open, c.ID)
			}
		}
	case ToolResult:
		if e.Message != nil {
			d.open = without(d.open, e.Message.ToolCallID)
		}
	}
	Derive(&d.log, e)
}
