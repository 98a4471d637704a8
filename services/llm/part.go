package llm

import "slices"

// PartType says what a Part holds.
type PartType string

// Part types.
const (
	// PartText is text, as Message.Content is for a text-only message.
	PartText PartType = "text"
	// PartImage is an image: MediaType image/png, image/jpeg, image/gif
	// or image/webp.
	PartImage PartType = "image"
	// PartFile is a document or other file: Name and MediaType say what
	// it is; Text holds it when it is text.
	PartFile PartType = "file"
)

// Part is one piece of a multimodal message. A message whose content is
// text only has no parts and keeps its text in Message.Content, so a
// plain conversation costs nothing more; a message with parts lists its
// whole content in order in Parts, and Content then holds the text of its
// text parts for readers that want only text (titles, hooks, logs).
//
// Bytes live in the attachments store, not in the session log: a part in
// the log names its bytes by Ref ("sha256:<hex>"), and Data is set only
// in memory — on the way in, before the store takes the bytes, and on the
// way out, when a model request is built and the provider encodes them.
type Part struct {
	Type PartType `json:"type"`
	// Text is a text part's text, or a text file's content.
	Text string `json:"text,omitempty"`
	// MediaType is the IANA media type of an image or file, as sniffed
	// from its bytes when they came from outside.
	MediaType string `json:"media_type,omitempty"`
	// Name is a file's name (no directory), for the model and the user.
	Name string `json:"name,omitempty"`
	// Ref is the content address of the bytes in the attachments store.
	Ref string `json:"ref,omitempty"`
	// Size is the size of the bytes.
	Size int64 `json:"size,omitempty"`
	// Data is the bytes, in memory only (see above).
	Data []byte `json:"-"`
}

// HasParts reports whether m carries parts beyond plain text.
func (m Message) HasParts() bool { return len(m.Parts) > 0 }

// TextOf joins the text of parts, as Message.Content holds it.
func TextOf(parts []Part) string {
	n := 0
	for _, p := range parts {
		if p.Type == PartText {
			n += len(p.Text)
		}
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		if p.Type == PartText {
			b = append(b, p.Text...)
		}
	}
	return string(b)
}

func cloneParts(parts []Part) []Part {
	return slices.Clone(parts)
}
