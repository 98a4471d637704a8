package agentloop

import (
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

// noteParts remembers that the session holds parts once a message with
// some enters it.
func (a *ReactLoopAgent) noteParts(m llm.Message) {
	if m.HasParts() && !a.parts.Load() {
		a.parts.Store(true)
	}
}

// resolveParts returns the history a provider gets: the log keeps parts
// by reference, the provider needs their bytes. Copy on write: h, which
// the session and every listener share, is never changed; the messages
// are copied (their parts' bytes are not) only when the session has parts.
func (a *ReactLoopAgent) resolveParts(h llm.History) (llm.History, error) {
	if !a.parts.Load() {
		return h, nil
	}
	msgs := h.Messages()
	var store *attachments.Store
	for i := range msgs {
		if !msgs[i].HasParts() {
			continue
		}
		if store == nil {
			var err error
			if store, err = attachments.Key.Get(a.scope); err != nil {
				return h, errs.Wrap(errs.ServiceUnavailable, err, fmt.Sprintf(
					"agent %q: message %d has attachments but no attachments service is mounted to read them; mount attachments.Plugin", a.id, i))
			}
		}
		if m, ok, err := inline(store, msgs[i]); ok {
			if err != nil {
				a.reportError(errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf(
					"agent %q: the result of tool call %q, stored beside the session, cannot be read; the model gets its 2 KiB preview", a.id, msgs[i].ToolCallID)))
			}
			msgs[i] = m
			continue
		}
		parts, err := store.Resolve(msgs[i].Parts)
		if err != nil {
			return h, errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf("agent %q: cannot read the attachments of message %d (%s)", a.id, i, msgs[i].Role))
		}
		msgs[i].Parts = parts
	}
	return llm.NewHistory(msgs...), nil
}
