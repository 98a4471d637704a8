package agentloop

import (
	"fmt"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

// A tool result larger than OutOfLine is kept once in the attachments
// store, beside the session log, and the log holds a preview and a
// reference: a 50 MB result would otherwise be a 75 MB line (JSON escapes)
// that every resume decodes, and every listing and live client copies.
// The model still gets the whole text: resolveParts reads it back for each
// request.
const (
	OutOfLine = 64 << 10
	// previewBytes of the result stay in the log, for people reading it.
	previewBytes = 2 << 10
	// resultPart names the part that holds a result out of line.
	resultPart = "tool-result"
)

// outOfLine stores a large result's text and returns the message the log
// keeps; small results, and sessions whose attachments are not persisted,
// keep it inline. A store that fails keeps it inline too: a slow resume
// is better than a lost result.
func (a *ReactLoopAgent) outOfLine(msg llm.Message) llm.Message {
	if len(msg.Content) <= OutOfLine || msg.HasParts() {
		return msg
	}
	store, err := attachments.Key.Get(a.scope)
	if err != nil || !store.Persistent() {
		return msg
	}
	ref, _, err := store.Put(a.sess.ID(), []byte(msg.Content))
	if err != nil {
		a.reportError(errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf(
			"agent %q: the %d-byte result of tool call %q could not be stored beside session %q, so the log keeps it inline; check the attachments directory",
			a.id, len(msg.Content), msg.ToolCallID, a.sess.ID())))
		return msg
	}
	size := len(msg.Content)
	cut := previewBytes
	for cut > 0 && !utf8.RuneStart(msg.Content[cut]) {
		cut--
	}
	msg.Content = fmt.Sprintf("%s\n[… %d of %d bytes shown; the whole result is stored as %s]", msg.Content[:cut], cut, size, ref)
	msg.Parts = []llm.Part{{Type: llm.PartText, Name: resultPart, Ref: ref, Size: int64(size)}}
	a.noteParts(msg)
	return msg
}

// inline returns a tool result stored out of line with its whole text
// back in Content, for a model request; ok is false for any other message.
// A result that cannot be read back goes as its preview, with a note the
// model reads, and err says why: a lost blob must not wedge the session.
func inline(store *attachments.Store, m llm.Message) (_ llm.Message, ok bool, err error) {
	if m.Role != llm.RoleTool || len(m.Parts) != 1 || m.Parts[0].Type != llm.PartText || m.Parts[0].Name != resultPart || m.Parts[0].Ref == "" {
		return m, false, nil
	}
	ref := m.Parts[0].Ref
	m.Parts = nil
	data, err := store.Get(ref)
	if err != nil {
		m.Content += "\n[the whole result could not be read back; only the part above is known]"
		return m, true, err
	}
	m.Content = string(data)
	return m, true, nil
}
