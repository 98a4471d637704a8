package session

import (
	"fmt"

	"github.com/dsh-go/dsh/services/llm"
)

// ReasonInterrupted ends a turn that a resumed log left open: dsh stopped
// (killed, or a dispose deadline passed) before the turn ended.
const ReasonInterrupted = "interrupted"

// InterruptedResult is the content of the error result given to a tool
// call whose result the log never recorded.
const InterruptedResult = "interrupted: dsh stopped before this tool call returned a result; it may or may not have run"

// Interruption describes the turn a resumed log left open.
type Interruption struct {
	// Turn is the number of the interrupted turn.
	Turn int
	// Prompt is the user message that started it; HasPrompt is false when
	// dsh stopped before recording it.
	Prompt    llm.Message
	HasPrompt bool
	// Unanswered is how many tool calls got a synthetic error result.
	Unanswered int
}

// closing returns the events that close a log ending inside a turn: an
// error result for every tool call left without one, then turn/end with
// reason interrupted. ok is false when the log ends between turns.
func closing(events []Event) (fix []Event, in Interruption, ok bool) {
	open := false
	var step int
	var calls []string // unanswered, in the model's order
	for _, e := range events {
		switch e.Type {
		case TurnStart:
			open, step, calls = true, 0, nil
			in = Interruption{Turn: e.Turn}
		case UserMessage:
			if open && !in.HasPrompt && e.Message != nil {
				in.Prompt, in.HasPrompt = e.Message.Clone(), true
			}
		case StepStart:
			step = e.Step
		case AssistantMessage:
			if e.Message != nil {
				for _, c := range e.Message.ToolCalls {
					calls = append(calls, c.ID)
				}
			}
		case ToolResult:
			if e.Message != nil {
				calls = without(calls, e.Message.ToolCallID)
			}
		case TurnEnd:
			open, calls = false, nil
		}
	}
	if !open {
		return nil, Interruption{}, false
	}
	for _, id := range calls {
		fix = append(fix, Event{Type: ToolResult, Turn: in.Turn, Step: step, Message: &llm.Message{
			Role: llm.RoleTool, ToolCallID: id, Content: InterruptedResult, IsError: true,
		}})
	}
	in.Unanswered = len(calls)
	fix = append(fix, Event{Type: TurnEnd, Turn: in.Turn, Reason: ReasonInterrupted,
		Error: fmt.Sprintf("turn %d was interrupted: dsh stopped before it ended", in.Turn)})
	return fix, in, true
}

func without(ids []string, id string) []string {
	for i, x := range ids {
		if x == id {
			return append(ids[:i:i], ids[i+1:]...)
		}
	}
	return ids
}
