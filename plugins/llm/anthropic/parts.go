package anthropic

import (
	"encoding/base64"

	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

// source is where an image's or a document's content is: base64 bytes
// with their media type, or a plain-text document's text.
type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// encodeParts renders a message's parts as content blocks: text as text
// blocks (an empty one is dropped, the API refuses them), an image as an
// image block with a base64 source, a PDF as a document block with a
// base64 source, and a text file as a document block with a plain-text
// source, titled with the file's name. The same blocks serve a user
// message and a tool result's content; a part the API cannot take is
// refused in a user message and noted as left out in a tool result
// (parts.Omitted), whose refusal would wedge the conversation.
func encodeParts(ps []llm.Part, at parts.Where, tool bool) ([]block, error) {
	all := parts.Capabilities{Images: true, Documents: true}
	out := make([]block, 0, len(ps))
	for i, p := range ps {
		at.Part = i
		switch {
		case p.Type == llm.PartText:
			if p.Text != "" {
				out = append(out, block{Type: "text", Text: p.Text})
			}
		case tool && !all.Takes(p) && !parts.IsTextType(p.MediaType):
			out = append(out, block{Type: "text", Text: parts.Omitted(p, at.Provider, at.Model)})
		case p.Type == llm.PartImage:
			if !parts.IsImageType(p.MediaType) {
				return nil, at.Refuse(p, all)
			}
			data, err := at.Bytes(p)
			if err != nil {
				return nil, err
			}
			out = append(out, block{Type: "image", Source: base64Source(parts.BaseType(p.MediaType), data)})
		case parts.IsPDF(p):
			data, err := at.Bytes(p)
			if err != nil {
				return nil, err
			}
			out = append(out, block{Type: "document", Source: base64Source("application/pdf", data), Title: p.Name})
		default:
			text, err := at.Text(p, all)
			if err != nil {
				return nil, err
			}
			out = append(out, block{Type: "document", Source: &source{Type: "text", MediaType: "text/plain", Data: text}, Title: p.Name})
		}
	}
	return out, nil
}

func base64Source(mediaType string, data []byte) *source {
	return &source{Type: "base64", MediaType: mediaType, Data: base64.StdEncoding.EncodeToString(data)}
}
