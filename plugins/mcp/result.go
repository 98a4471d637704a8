package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dsh-go/dsh/services/tools"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// result turns an MCP result into what the model reads. tools.Result
// holds text only, so an image or audio part is described in a line
// (media type and size) until results carry attachments. Structured
// content is added as JSON text when no part of the content is text, as
// servers are asked to send its text form themselves.
func result(r *mcpsdk.CallToolResult, max int) tools.Result {
	var parts []string
	hasText := false
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcpsdk.TextContent:
			parts = append(parts, c.Text)
			hasText = true
		case *mcpsdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes; images are not passed on to the model yet]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcpsdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes; audio is not passed on to the model]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcpsdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s %s]", c.URI, c.Name))
		case *mcpsdk.EmbeddedResource:
			parts = append(parts, embedded(c.Resource))
			hasText = hasText || c.Resource != nil && c.Resource.Text != ""
		default:
			parts = append(parts, fmt.Sprintf("[content of type %T not shown]", c))
		}
	}
	if r.StructuredContent != nil && !hasText {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return tools.Result{Content: capText(strings.Join(parts, "\n"), max), IsError: r.IsError}
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
// and says how much was left out.
func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[result cut: the first %d of %d bytes are shown (max_result_bytes)]", cut, len(s))
}
