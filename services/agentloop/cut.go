package agentloop

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// keepCut records the text a cancelled step had streamed, as an
// assistant/message with finish "cut": the person who stopped a long
// answer read it (so did every attached client), and it must stay in the
// log they resume and in what the model is told next turn. Only the text
// is kept: a half-streamed tool call never runs, and half a signed
// reasoning block would be refused by the providers that sign it.
// A step that failed for another reason, or streamed no text, records
// nothing here.
func (a *ReactLoopAgent) keepCut(asm *llm.Assembler, turn, step int, msgID string, req llm.Request) {
	if asm == nil || a.checkStop() == "" {
		return
	}
	text := asm.Message().Content
	if text == "" {
		return
	}
	msg := llm.Message{ID: msgID, Role: llm.RoleAssistant, Content: text}
	usage := asm.Usage()
	a.sess.Append(stdctx.Background(), session.Event{Type: session.AssistantMessage, Turn: turn, Step: step,
		Message: &msg, Usage: &usage, Finish: session.FinishCut, Provider: req.Provider, Model: req.Model})
}
