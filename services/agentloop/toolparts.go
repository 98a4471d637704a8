package agentloop

import (
	"fmt"

	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

// toolParts stores the parts a tool produced and returns its result
// message with them by reference, its text first. The message enters the
// session at once, so the store's references are never released; a part
// that cannot be stored turns the result into an error the model reads.
func (a *ReactLoopAgent) toolParts(msg llm.Message, parts []llm.Part) llm.Message {
	store, err := attachments.Key.Get(a.scope)
	if err == nil {
		var stored []llm.Part
		if stored, _, err = store.Admit(a.sess.ID(), parts); err == nil {
			msg.Parts = append([]llm.Part{{Type: llm.PartText, Text: msg.Content}}, stored...)
			a.noteParts(msg)
			return msg
		}
	}
	msg.Content = fmt.Sprintf("%s\n[the attachment the tool produced could not be kept: %v]", msg.Content, err)
	msg.IsError = true
	return msg
}
