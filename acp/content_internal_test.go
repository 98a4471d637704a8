package acp

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")
	pdfBytes = []byte("%PDF-1.7\n1 0 obj\n")
	images   = parts.Capabilities{Images: true}
	all      = parts.Capabilities{Images: true, Documents: true}
)

func imageBlock(data []byte, mt string) acp.ContentBlock {
	return acp.ContentBlock{Image: &acp.ContentBlockImage{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mt}}
}

func blobBlock(uri, mt string, data []byte) acp.ContentBlock {
	return acp.ContentBlock{Resource: &acp.ContentBlockResource{Type: "resource", Resource: acp.EmbeddedResourceResource{
		BlobResourceContents: &acp.BlobResourceContents{Uri: uri, MimeType: &mt, Blob: base64.StdEncoding.EncodeToString(data)}}}}
}

func linkBlock(uri string) acp.ContentBlock {
	return acp.ContentBlock{ResourceLink: &acp.ContentBlockResourceLink{Type: "resource_link", Name: filepath.Base(uri), Uri: uri}}
}

// A text-only prompt stays text, exactly as before attachments.
func TestTextPromptHasNoParts(t *testing.T) {
	res := acp.ContentBlock{Resource: &acp.ContentBlockResource{Type: "resource", Resource: acp.EmbeddedResourceResource{
		TextResourceContents: &acp.TextResourceContents{Uri: "file:///p/a.go", Text: "package a"}}}}
	pc, err := contentOf([]acp.ContentBlock{acp.TextBlock("look at"), res, linkBlock("https://example.com/x")}, t.TempDir(), all)
	if err != nil {
		t.Fatal(err)
	}
	want := "look at\n<context uri=\"file:///p/a.go\">\npackage a\n</context>\n[x](https://example.com/x)"
	if pc.Parts != nil || pc.Text != want || pc.Content() != want {
		t.Fatalf("%+v", pc)
	}
	if _, err := contentOf([]acp.ContentBlock{acp.TextBlock("  ")}, "", all); !errs.HasCode(err, BadParams) {
		t.Fatalf("an empty prompt: %v", err)
	}
}

// An image becomes an image part with its bytes and sniffed type, beside
// the text parts; the text of the parts is the message's content.
func TestImageBecomesAPart(t *testing.T) {
	pc, err := contentOf([]acp.ContentBlock{acp.TextBlock("what is"), imageBlock(pngBytes, "image/jpeg"), acp.TextBlock("this?")}, "", images)
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.Parts) != 3 || pc.Parts[1].Type != llm.PartImage || pc.Parts[1].MediaType != "image/png" ||
		string(pc.Parts[1].Data) != string(pngBytes) || pc.Parts[1].Size != int64(len(pngBytes)) {
		t.Fatalf("parts %+v", pc.Parts)
	}
	if pc.Content() != "what is\nthis?" || pc.Text != "what is\n[image image/png]\nthis?" {
		t.Fatalf("content %q, text %q", pc.Content(), pc.Text)
	}
}

// What the provider does not take, sent as content, is refused with the
// parts code; bytes that are no image are bad params.
func TestRefusals(t *testing.T) {
	for name, c := range map[string]struct {
		block   acp.ContentBlock
		accepts parts.Capabilities
		code    errs.Code
	}{
		"image, text-only model": {imageBlock(pngBytes, "image/png"), parts.Capabilities{}, parts.Unsupported},
		"not an image":           {imageBlock([]byte("hello"), "image/png"), all, BadParams},
		"bad base64":             {acp.ContentBlock{Image: &acp.ContentBlockImage{Type: "image", Data: "%%%", MimeType: "image/png"}}, all, BadParams},
		"pdf, no documents":      {blobBlock("file:///p/spec.pdf", "application/pdf", pdfBytes), images, parts.Unsupported},
		"binary blob":            {blobBlock("file:///p/a.bin", "application/octet-stream", []byte{0, 1, 2, 0xff}), all, parts.Unsupported},
		"audio":                  {acp.ContentBlock{Audio: &acp.ContentBlockAudio{Type: "audio", Data: "AA==", MimeType: "audio/wav"}}, all, BadParams},
	} {
		_, err := contentOf([]acp.ContentBlock{acp.TextBlock("see"), c.block}, "", c.accepts)
		if !errs.HasCode(err, c.code) || !strings.Contains(err.Error(), "block 1") {
			t.Errorf("%s: want %s naming block 1, got %v", name, c.code, err)
		}
	}
}

// Embedded blobs: a PDF is a file part with its bytes, a text blob a file
// part with its text.
func TestBlobResources(t *testing.T) {
	pc, err := contentOf([]acp.ContentBlock{blobBlock("file:///p/spec.pdf", "application/pdf", pdfBytes), blobBlock("file:///p/d.json", "application/json", []byte(`{"a":1}`))}, "", all)
	if err != nil {
		t.Fatal(err)
	}
	pdf, js := pc.Parts[0], pc.Parts[1]
	if pdf.Type != llm.PartFile || pdf.MediaType != "application/pdf" || pdf.Name != "spec.pdf" || string(pdf.Data) != string(pdfBytes) {
		t.Fatalf("pdf %+v", pdf)
	}
	if js.Type != llm.PartFile || js.MediaType != "application/json" || js.Text != `{"a":1}` || js.Name != "d.json" {
		t.Fatalf("json %+v", js)
	}
}

// A resource_link to a file inside cwd is read after its link; one
// outside (by path or by symlink), one not on disk and one the provider
// cannot take stay links.
func TestResourceLinksAreReadInsideCwdOnly(t *testing.T) {
	outside := t.TempDir()
	cwd := t.TempDir()
	write := func(dir, name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notes := write(cwd, "docs/notes.txt", []byte("remember the milk"))
	logo := write(cwd, "logo.png", pngBytes)
	secret := write(outside, "secret.txt", []byte("do not read"))
	if err := os.Symlink(secret, filepath.Join(cwd, "escape.txt")); err != nil {
		t.Fatal(err)
	}
	pc, err := contentOf([]acp.ContentBlock{acp.TextBlock("see"), linkBlock("file://" + notes), linkBlock("file://" + logo)}, cwd, images)
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.Parts) != 5 || pc.Parts[2].Type != llm.PartFile || pc.Parts[2].Text != "remember the milk" || pc.Parts[2].Name != "notes.txt" ||
		pc.Parts[4].Type != llm.PartImage || pc.Parts[4].MediaType != "image/png" {
		t.Fatalf("parts %+v", pc.Parts)
	}
	if !strings.Contains(pc.Content(), "[notes.txt](file://"+notes+")") {
		t.Fatalf("the link is gone from the text: %q", pc.Content())
	}
	for name, uri := range map[string]string{
		"outside":   "file://" + secret,
		"dot-dot":   "file://" + cwd + "/../" + filepath.Base(outside) + "/secret.txt",
		"symlink":   "file://" + filepath.Join(cwd, "escape.txt"),
		"missing":   "file://" + filepath.Join(cwd, "nope.txt"),
		"directory": "file://" + filepath.Join(cwd, "docs"),
	} {
		pc, err := contentOf([]acp.ContentBlock{linkBlock(uri)}, cwd, all)
		if err != nil || pc.Parts != nil {
			t.Errorf("%s: read %+v %v", name, pc.Parts, err)
		}
	}
	// A text-only model: the image stays a link, the text file is read.
	pc, err = contentOf([]acp.ContentBlock{linkBlock("file://" + logo), linkBlock("file://" + notes)}, cwd, parts.Capabilities{})
	if err != nil || len(pc.Parts) != 3 || pc.Parts[2].Text != "remember the milk" {
		t.Fatalf("text-only: %+v %v", pc.Parts, err)
	}
}
