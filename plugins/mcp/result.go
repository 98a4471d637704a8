package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/tools"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// result turns an MCP result into what the model reads: text content as
// text, images (image content, and embedded resources whose bytes are an
// image) as image parts the agent loop stores as attachments, each noted
// by a line in the text where it stood. Audio and other blobs are
// described in a line (media type and size). Structured content is added
// as JSON text when no part of the content is text, as servers are asked
// to send its text form themselves.
//
// The text is cut at max bytes; an image whose line falls after the cut
// is not attached either, so the model never gets an image it cannot
// place.
func result(r *mcpsdk.CallToolResult, max int, limits attachments.Limits) tools.Result {
	var b strings.Builder
	im := images{limits: limits}
	var lineEnds []int // in b, the end of each attached image's line
	hasText := false
	add := func(s string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	addImage := func(what string, data []byte, declared string) {
		line, attached := im.add(what, data, declared)
		add(line)
		if attached {
			lineEnds = append(lineEnds, b.Len())
		}
	}
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcpsdk.TextContent:
			add(c.Text)
			hasText = true
		case *mcpsdk.ImageContent:
			addImage("image", c.Data, c.MIMEType)
		case *mcpsdk.AudioContent:
			add(fmt.Sprintf("[audio: %s, %d bytes; audio is not passed on to the model]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcpsdk.ResourceLink:
			add(fmt.Sprintf("[resource link: %s %s]", c.URI, c.Name))
		case *mcpsdk.EmbeddedResource:
			if res := c.Resource; res != nil && res.Text == "" && isImageBlob(res) {
				addImage("resource "+res.URI, res.Blob, res.MIMEType)
				continue
			}
			add(embedded(c.Resource))
			hasText = hasText || c.Resource != nil && c.Resource.Text != ""
		default:
			add(fmt.Sprintf("[content of type %T not shown]", c))
		}
	}
	if r.StructuredContent != nil && !hasText {
		if j, err := json.Marshal(r.StructuredContent); err == nil {
			add(string(j))
		}
	}
	text, kept := capText(b.String(), max)
	parts := im.parts
	for i, end := range lineEnds {
		if end > kept {
			parts = parts[:i]
			text += fmt.Sprintf("\n[%d of the %d images are not attached: their lines are past the cut]", len(lineEnds)-i, len(lineEnds))
			break
		}
	}
	return tools.Result{Content: text, IsError: r.IsError, Parts: parts}
}

// isImageBlob reports whether an embedded resource's blob is meant as an
// image: declared one, or with bytes that are one. A declared image whose
// bytes are not is still taken, so the model is told it was refused.
func isImageBlob(r *mcpsdk.ResourceContents) bool {
	if len(r.Blob) == 0 {
		return false
	}
	if strings.HasPrefix(strings.ToLower(r.MIMEType), "image/") {
		return true
	}
	mt, err := attachments.Sniff(r.Blob, "", "")
	return err == nil && strings.HasPrefix(mt, "image/")
}

func embedded(r *mcpsdk.ResourceContents) string {
	switch {
	case r == nil:
		return "[empty embedded resource]"
	case r.Text != "":
		return r.Text
	default:
		return fmt.Sprintf("[resource %s: %s, %d bytes]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
	}
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown media type"
	}
	return mime
}

// capText keeps the first max bytes of s, cut on a character boundary,
// and says how much was left out; kept is how many bytes of s remain.
func capText(s string, max int) (text string, kept int) {
	if len(s) <= max {
		return s, len(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[result cut: the first %d of %d bytes are shown (max_result_bytes)]", cut, len(s)), cut
}
