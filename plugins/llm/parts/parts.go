// Package parts is what the model providers share about the parts of a
// multimodal message (llm.Part): what a provider takes (Capabilities, for
// the entry points that must not accept what the model will refuse), the
// errors of a part a provider cannot send, and the one conversion every
// provider applies the same way, a text file inlined as text.
//
// A provider checks every part while it renders a request, before anything
// is sent: a part it cannot take is an Unsupported error naming the
// provider, the model and the part; a part whose bytes were not resolved
// from the attachments store is an Unresolved error, never an empty image.
package parts

import (
	"github.com/dsh-go/dsh/services/llm"
)

// Capabilities says which parts beyond text a provider sends to its model.
// Text, and text files (inlined as text), every provider takes.
type Capabilities struct {
	// Images: PNG, JPEG, GIF and WebP images.
	Images bool `json:"images"`
	// Documents: PDF files.
	Documents bool `json:"documents"`
}

// Capable is implemented by providers that take more than text. A provider
// that does not implement it takes text only.
type Capable interface {
	Capabilities(model string) Capabilities
}

// Of returns what p takes for model: its Capabilities if it says, none
// otherwise.
func Of(p llm.Provider, model string) Capabilities {
	if c, ok := p.(Capable); ok {
		return c.Capabilities(model)
	}
	return Capabilities{}
}

// Takes reports whether a provider with c can send p as itself (not
// converted): text and text files always, images and PDFs when c says so.
func (c Capabilities) Takes(p llm.Part) bool {
	switch {
	case p.Type == llm.PartText:
		return true
	case p.Type == llm.PartImage:
		return c.Images && IsImageType(p.MediaType)
	case IsPDF(p):
		return c.Documents
	}
	_, ok := FileText(p)
	return ok
}
