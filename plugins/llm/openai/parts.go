package openai

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

// wirePart is one content part of a user message: text, or an image by
// URL (here always a data: URL, the bytes inline).
type wirePart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

// partsMessage renders a user or tool message with parts. Text files are
// inlined as text (parts.Inline). A user message with images sends its
// content as parts, text and image_url with a data: URL; without images
// it sends one string, the segments joined by blank lines, which every
// OpenAI-compatible server takes. A tool message can carry text only:
// each image it holds is a note in its text and goes, as returned, to a
// user message after the tool messages (images). A part the model cannot
// take is refused in a user message, but only noted as left out in a tool
// result (parts.Omitted): the person chose to send the one, and can be
// told; the other a tool produced, and refusing it would wedge the
// conversation, since it stays in the history of every later request.
func (p *Provider) partsMessage(m llm.Message, at parts.Where, model string) (wireMessage, []wirePart, error) {
	caps := p.Capabilities(model)
	tool := m.Role == llm.RoleTool
	var segs []wirePart
	var images []wirePart
	hasImage := false
	for i, part := range m.Parts {
		at.Part = i
		switch {
		case part.Type == llm.PartText:
			if part.Text != "" {
				segs = append(segs, wirePart{Type: "text", Text: part.Text})
			}
		case tool && !caps.Takes(part) && !parts.IsTextType(part.MediaType):
			segs = append(segs, wirePart{Type: "text", Text: parts.Omitted(part, p.name, model)})
		case part.Type == llm.PartImage:
			if !caps.Takes(part) {
				return wireMessage{}, nil, at.Refuse(part, caps)
			}
			data, err := at.Bytes(part)
			if err != nil {
				return wireMessage{}, nil, err
			}
			img := wirePart{Type: "image_url", ImageURL: &imageURL{URL: dataURL(part.MediaType, data)}}
			if tool {
				images = append(images, wirePart{Type: "text", Text: fmt.Sprintf("Image %d returned by tool call %s:", i, m.ToolCallID)}, img)
				segs = append(segs, wirePart{Type: "text", Text: fmt.Sprintf("[image %d (%s) follows in the next user message]", i, part.MediaType)})
				continue
			}
			hasImage = true
			segs = append(segs, img)
		default:
			text, err := at.Text(part, caps)
			if err != nil {
				return wireMessage{}, nil, err
			}
			segs = append(segs, wirePart{Type: "text", Text: parts.Inline(part, text)})
		}
	}
	out := wireMessage{Role: "user"}
	if tool {
		out.Role, out.ToolCallID = "tool", m.ToolCallID
	}
	if hasImage {
		out.Content = segs
	} else {
		out.Content = str(joinText(segs))
	}
	return out, images, nil
}

// imagesMessage is the user message that carries the images of a run of
// tool results.
func imagesMessage(images []wirePart) wireMessage {
	return wireMessage{Role: "user", Content: images}
}

func joinText(segs []wirePart) string {
	texts := make([]string, len(segs))
	for i, s := range segs {
		texts[i] = s.Text
	}
	return strings.Join(texts, "\n\n")
}

// dataURL is the data: URL of an image, as the API takes inline images.
func dataURL(mediaType string, data []byte) string {
	mt := parts.BaseType(mediaType)
	enc := base64.StdEncoding
	var b strings.Builder
	b.Grow(len("data:;base64,") + len(mt) + enc.EncodedLen(len(data)))
	b.WriteString("data:")
	b.WriteString(mt)
	b.WriteString(";base64,")
	b.WriteString(enc.EncodeToString(data))
	return b.String()
}
