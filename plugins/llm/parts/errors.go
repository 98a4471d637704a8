package parts

import (
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
)

// Codes of the parts a provider cannot send.
const (
	// Unsupported: the model cannot take a part (an image for a text-only
	// model, a PDF where documents are not taken, a binary file). The
	// request is not sent.
	Unsupported errs.Code = "LLM_PART_UNSUPPORTED"
	// Unresolved: an image or binary file reached the provider without its
	// bytes (a Ref whose Data the request builder did not fill). This is a
	// bug of whoever built the request; the request is not sent.
	Unresolved errs.Code = "LLM_PART_UNRESOLVED"
)

// Where says which part of a request a provider is rendering, for errors.
type Where struct {
	Provider, Model string
	// Message is the index of the message in the request's history, Part
	// the index of the part in the message.
	Message, Part int
}

// describe names a part: its index, type, media type and file name.
func (w Where) describe(p llm.Part) string {
	s := fmt.Sprintf("part %d of message %d (%s", w.Part, w.Message, p.Type)
	if p.MediaType != "" {
		s += ", " + p.MediaType
	}
	if p.Name != "" {
		s += fmt.Sprintf(", %q", p.Name)
	}
	return s + ")"
}

// Refuse is the Unsupported error for p: what the model takes says how to
// fix it.
func (w Where) Refuse(p llm.Part, c Capabilities) error {
	takes := "text and text files only"
	switch {
	case c.Images && c.Documents:
		takes = "text, text files, PNG/JPEG/GIF/WebP images and PDFs"
	case c.Images:
		takes = "text, text files and PNG/JPEG/GIF/WebP images"
	case c.Documents:
		takes = "text, text files and PDFs"
	}
	return errs.New(Unsupported, fmt.Sprintf(
		"model provider %q (model %q) cannot take %s: it takes %s; remove the attachment, convert it, or use a provider that takes it",
		w.Provider, w.Model, w.describe(p), takes))
}

// Missing is the Unresolved error for p.
func (w Where) Missing(p llm.Part) error {
	ref := p.Ref
	if ref == "" {
		ref = "no reference"
	}
	return errs.New(Unresolved, fmt.Sprintf(
		"model provider %q (model %q) got %s without its bytes (%s): the request was built without resolving it from the attachments store; this is a bug of the request builder, nothing was sent",
		w.Provider, w.Model, w.describe(p), ref))
}

// Bytes returns the bytes of an image or binary file, or the Unresolved
// error when they are missing.
func (w Where) Bytes(p llm.Part) ([]byte, error) {
	if len(p.Data) == 0 {
		return nil, w.Missing(p)
	}
	return p.Data, nil
}

// Text returns the text of a text file; a textual file whose text is not
// there is Unresolved, a binary file Unsupported (with c, what the model
// takes, to say so).
func (w Where) Text(p llm.Part, c Capabilities) (string, error) {
	if text, ok := FileText(p); ok {
		return text, nil
	}
	if IsTextType(p.MediaType) {
		return "", w.Missing(p)
	}
	return "", w.Refuse(p, c)
}
