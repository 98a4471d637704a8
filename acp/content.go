package acp

import (
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

// MaxLinkedFile bounds a file a resource_link names that the server reads
// into the prompt: larger ones stay links (the attachments store has its
// own, smaller limits; this only keeps a link to a huge file from being
// read into memory).
const MaxLinkedFile = 32 << 20

// promptContent is a prompt turned into what a message holds.
type promptContent struct {
	// Text is the prompt as text only, what a text-only delivery sends:
	// text blocks, embedded text resources under their URI, links as
	// Markdown links, images and binary content described.
	Text string
	// Parts is the prompt as parts, in block order, with the bytes of
	// images and files in Data; nil when the prompt is text only (text
	// blocks, text resources and links the server did not read), which
	// then travels as Text, as cheap as before attachments.
	Parts []llm.Part
}

// Content is the text a message with these parts carries in
// Message.Content: the text of its text parts, or Text when there are
// none.
func (c promptContent) Content() string {
	if c.Parts == nil {
		return c.Text
	}
	return llm.TextOf(c.Parts)
}

// contentOf turns a prompt's blocks into parts. Text is a text part; an
// image an image part with its bytes; an embedded resource a file part
// (text, or bytes for a blob); a resource_link to a file:// inside cwd is
// read, confined to cwd as the file tools are, and becomes a file or image
// part after its link; other links stay links. What the session's provider
// cannot take (accepts) is refused when the client sent it as content, and
// left a link when the client only named it.
func contentOf(blocks []acp.ContentBlock, cwd string, accepts parts.Capabilities) (promptContent, error) {
	var text strings.Builder
	var ps []llm.Part
	multimodal := false
	addText := func(s string) {
		if len(ps) > 0 {
			s = "\n" + s
		}
		ps = append(ps, llm.Part{Type: llm.PartText, Text: s})
	}
	for i, c := range blocks {
		if i > 0 {
			text.WriteString("\n")
		}
		switch {
		case c.Text != nil:
			text.WriteString(c.Text.Text)
			addText(c.Text.Text)
		case c.Image != nil:
			p, err := imagePart(i, c.Image, accepts)
			if err != nil {
				return promptContent{}, err
			}
			fmt.Fprintf(&text, "[image %s]", p.MediaType)
			ps, multimodal = append(ps, p), true
		case c.Resource != nil && c.Resource.Resource.TextResourceContents != nil:
			r := c.Resource.Resource.TextResourceContents
			fmt.Fprintf(&text, "<context uri=%q>\n%s\n</context>", r.Uri, r.Text)
			ps = append(ps, llm.Part{Type: llm.PartFile, Name: nameOf(r.Uri), MediaType: textType(r.MimeType, r.Uri), Text: r.Text, Size: int64(len(r.Text))})
		case c.Resource != nil && c.Resource.Resource.BlobResourceContents != nil:
			p, err := blobPart(i, c.Resource.Resource.BlobResourceContents, accepts)
			if err != nil {
				return promptContent{}, err
			}
			fmt.Fprintf(&text, "[%s %s %s]", p.Type, p.MediaType, c.Resource.Resource.BlobResourceContents.Uri)
			ps, multimodal = append(ps, p), true
		case c.ResourceLink != nil:
			link := fmt.Sprintf("[%s](%s)", c.ResourceLink.Name, c.ResourceLink.Uri)
			text.WriteString(link)
			addText(link)
			if p, ok := linkedFile(c.ResourceLink.Uri, cwd, accepts); ok {
				ps, multimodal = append(ps, p), true
			}
		default:
			return promptContent{}, errs.New(BadParams, fmt.Sprintf(
				"prompt block %d is audio, which dsh does not take (promptCapabilities.audio is false); send text, images, resources or resource links", i))
		}
	}
	if strings.TrimSpace(text.String()) == "" && !multimodal {
		return promptContent{}, errs.New(BadParams, "the prompt is empty; send at least one text block")
	}
	out := promptContent{Text: text.String()}
	if multimodal {
		out.Parts = ps
	}
	return out, nil
}

// imagePart decodes an image block, refused when the provider takes no
// images or not this kind.
func imagePart(i int, img *acp.ContentBlockImage, accepts parts.Capabilities) (llm.Part, error) {
	data, err := base64.StdEncoding.DecodeString(img.Data)
	if err != nil || len(data) == 0 {
		return llm.Part{}, errs.New(BadParams, fmt.Sprintf("prompt block %d: the image's data is not base64 of an image (%v); send the image's bytes in base64", i, err))
	}
	p := llm.Part{Type: llm.PartImage, MediaType: mediaType(img.MimeType, "", data), Data: data, Size: int64(len(data))}
	if img.Uri != nil {
		p.Name = nameOf(*img.Uri)
	}
	// The bytes decide the type; a declared type they contradict is not
	// an image.
	if !strings.HasPrefix(p.MediaType, "image/") {
		return llm.Part{}, errs.New(BadParams, fmt.Sprintf("prompt block %d: declared %s, but its bytes are %s, not an image", i, img.MimeType, p.MediaType))
	}
	return p, refuse(i, p, accepts)
}

// blobPart decodes an embedded binary resource: an image, a PDF, or a file
// whose bytes are text.
func blobPart(i int, b *acp.BlobResourceContents, accepts parts.Capabilities) (llm.Part, error) {
	data, err := base64.StdEncoding.DecodeString(b.Blob)
	if err != nil {
		return llm.Part{}, errs.New(BadParams, fmt.Sprintf("prompt block %d: the resource's blob is not base64 (%v); send its bytes in base64", i, err))
	}
	declared := ""
	if b.MimeType != nil {
		declared = *b.MimeType
	}
	p := filePart(nameOf(b.Uri), mediaType(declared, b.Uri, data), data)
	return p, refuse(i, p, accepts)
}

// filePart is the part of a file's bytes: an image, a PDF, a text file
// (its text kept as Text too) or a binary file.
func filePart(name, mt string, data []byte) llm.Part {
	p := llm.Part{Type: llm.PartFile, Name: name, MediaType: mt, Data: data, Size: int64(len(data))}
	if parts.IsImageType(mt) {
		p.Type = llm.PartImage
	} else if parts.IsTextType(mt) && utf8.Valid(data) {
		p.Text = string(data)
	}
	return p
}

// refuse is the error for a part the provider cannot take, nil otherwise.
func refuse(i int, p llm.Part, accepts parts.Capabilities) error {
	if accepts.Takes(p) {
		return nil
	}
	return errs.New(parts.Unsupported, fmt.Sprintf(
		"prompt block %d (%s, %s) is not something this session's model takes (images: %v, PDFs: %v, as promptCapabilities say); send it as text or use an agent whose provider takes it",
		i, p.Type, p.MediaType, accepts.Images, accepts.Documents))
}

// linkedFile reads the file a resource_link names when it is a file://
// URI inside cwd, a regular file no larger than MaxLinkedFile, and its
// part is one the provider takes. Anything else stays a link.
func linkedFile(uri, cwd string, accepts parts.Capabilities) (llm.Part, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || cwd == "" {
		return llm.Part{}, false
	}
	rel, err := filepath.Rel(cwd, filepath.Clean(u.Path))
	if err != nil || !filepath.IsLocal(rel) {
		return llm.Part{}, false
	}
	// os.Root refuses a path that leaves cwd, by .. or by a symlink.
	root, err := os.OpenRoot(cwd)
	if err != nil {
		return llm.Part{}, false
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return llm.Part{}, false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() > MaxLinkedFile {
		return llm.Part{}, false
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxLinkedFile+1))
	if err != nil || len(data) > MaxLinkedFile {
		return llm.Part{}, false
	}
	p := filePart(path.Base(u.Path), mediaType("", u.Path, data), data)
	if p.Type == llm.PartFile && p.Text == "" && len(data) > 0 && !parts.IsPDF(p) {
		return llm.Part{}, false // a binary file: the link says enough
	}
	return p, accepts.Takes(p)
}

// mediaType decides what bytes are: what they look like when that is an
// image or a PDF (never the declared type alone), else the declared type,
// else the file name's, else text/plain for UTF-8 and
// application/octet-stream for the rest.
func mediaType(declared, name string, data []byte) string {
	sniffed := parts.BaseType(http.DetectContentType(data))
	if strings.HasPrefix(sniffed, "image/") || sniffed == "application/pdf" {
		return sniffed
	}
	if d := parts.BaseType(declared); d != "" && !strings.HasPrefix(d, "image/") && d != "application/pdf" {
		return d
	}
	if byName := parts.BaseType(mime.TypeByExtension(path.Ext(name))); byName != "" && !strings.HasPrefix(byName, "image/") && byName != "application/pdf" {
		return byName
	}
	if utf8.Valid(data) {
		return "text/plain"
	}
	return "application/octet-stream"
}

// textType is the media type of an embedded text resource.
func textType(declared *string, uri string) string {
	if declared != nil && *declared != "" {
		return parts.BaseType(*declared)
	}
	if t := parts.BaseType(mime.TypeByExtension(path.Ext(uri))); parts.IsTextType(t) {
		return t
	}
	return "text/plain"
}

// nameOf is the file name a URI ends with.
func nameOf(uri string) string {
	if u, err := url.Parse(uri); err == nil && u.Path != "" {
		return path.Base(u.Path)
	}
	return ""
}
