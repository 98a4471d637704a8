package mcp

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func contents(c ...mcpsdk.Content) *mcpsdk.CallToolResult {
	return &mcpsdk.CallToolResult{Content: c}
}

// The media type of an attached image is what its bytes are, whatever
// the server declared.
func TestAnImageIsAttachedAsItsBytesAre(t *testing.T) {
	img := testPNG()
	r := result(contents(&mcpsdk.ImageContent{MIMEType: "image/jpeg", Data: img}), 1000, resultLimits)
	if len(r.Parts) != 1 || r.Parts[0].Type != llm.PartImage || r.Parts[0].MediaType != "image/png" || !bytes.Equal(r.Parts[0].Data, img) {
		t.Fatalf("%+v", r.Parts)
	}
	if !strings.Contains(r.Content, "image/png") {
		t.Fatalf("the line names the declared type, not the sniffed one: %q", r.Content)
	}
}

func TestImagesModelsCannotTakeAreDescribed(t *testing.T) {
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"></svg>`)
	pdf := []byte("%PDF-1.4\n%âãÏÓ\n1 0 obj\n")
	for name, c := range map[string]struct {
		content mcpsdk.Content
		want    string
	}{
		"svg":            {&mcpsdk.ImageContent{MIMEType: "image/svg+xml", Data: svg}, "image/svg+xml, 67 bytes; not attached: models take PNG, JPEG, GIF or WebP images"},
		"not an image":   {&mcpsdk.ImageContent{MIMEType: "image/png", Data: []byte("hello")}, "declared image/png but its bytes are not an image (5 bytes); not attached"},
		"empty":          {&mcpsdk.ImageContent{MIMEType: "image/png"}, "not an image (0 bytes); not attached"},
		"pdf resource":   {&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///a.pdf", MIMEType: "application/pdf", Blob: pdf}}, "[resource file:///a.pdf: application/pdf, 27 bytes]"},
		"fake png blob":  {&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///a.png", MIMEType: "image/png", Blob: pdf}}, "[resource file:///a.png: declared image/png but its bytes are not an image (27 bytes); not attached]"},
		"undeclared png": {&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///a", Blob: testPNG()}}, "[resource file:///a: image/png, "},
	} {
		r := result(contents(c.content), 1000, resultLimits)
		if !strings.Contains(r.Content, c.want) {
			t.Errorf("%s: %q lacks %q", name, r.Content, c.want)
		}
		if attached := strings.Contains(r.Content, "attached to this result"); attached != (len(r.Parts) == 1) || len(r.Parts) > 1 {
			t.Errorf("%s: the text and the parts disagree: %q, %d parts", name, r.Content, len(r.Parts))
		}
		if name != "undeclared png" && len(r.Parts) != 0 {
			t.Errorf("%s: attached %+v", name, r.Parts)
		}
	}
}

// Images over the per-part limit, or past the per-message one, are
// described instead, so the store never refuses the whole result.
func TestImagesOverTheLimitsAreDescribed(t *testing.T) {
	img := testPNG()
	n := int64(len(img))
	big := append(bytes.Clone(img), make([]byte, 100)...)
	limits := attachments.Limits{PerPart: n + 50, PerMessage: 2 * n}
	r := result(contents(
		&mcpsdk.ImageContent{MIMEType: "image/png", Data: big},
		&mcpsdk.ImageContent{MIMEType: "image/png", Data: img},
		&mcpsdk.ImageContent{MIMEType: "image/png", Data: img},
		&mcpsdk.ImageContent{MIMEType: "image/png", Data: img},
	), 10000, limits)
	if len(r.Parts) != 2 {
		t.Fatalf("%d parts, want the 2 that fit: %q", len(r.Parts), r.Content)
	}
	lines := strings.Split(r.Content, "\n")
	if len(lines) != 4 ||
		!strings.Contains(lines[0], "not attached: over the limit of") ||
		!strings.HasSuffix(lines[1], "attached to this result as image 1]") ||
		!strings.HasSuffix(lines[2], "attached to this result as image 2]") ||
		!strings.Contains(lines[3], "not attached: the images of this result would pass the limit of") {
		t.Fatalf("%q", r.Content)
	}
}

// The text cap also drops the images whose lines it cut, and says so.
func TestTheCutDropsTheImagesPastIt(t *testing.T) {
	img := testPNG()
	r := result(contents(
		&mcpsdk.ImageContent{MIMEType: "image/png", Data: img},
		&mcpsdk.TextContent{Text: strings.Repeat("x", 300)},
		&mcpsdk.ImageContent{MIMEType: "image/png", Data: img},
	), 256, resultLimits)
	if len(r.Parts) != 1 {
		t.Fatalf("%d parts", len(r.Parts))
	}
	if !strings.Contains(r.Content, "as image 1]") || !strings.HasSuffix(r.Content, "[1 of the 2 images are not attached: their lines are past the cut]") {
		t.Fatalf("%q", r.Content)
	}
}
