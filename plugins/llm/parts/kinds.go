package parts

import (
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/dsh-go/dsh/services/llm"
)

// imageTypes are the image media types both Anthropic's and OpenAI's APIs
// take.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// IsImageType reports whether an image of media type mt can be sent.
func IsImageType(mt string) bool { return imageTypes[BaseType(mt)] }

// IsPDF reports whether p is a PDF file.
func IsPDF(p llm.Part) bool {
	return p.Type == llm.PartFile && BaseType(p.MediaType) == "application/pdf"
}

// FileText returns the text of a text file: its Text, or its bytes when
// its media type is textual and they are UTF-8. A file whose text is in
// neither (a binary file, or one not resolved from the store) is not text.
func FileText(p llm.Part) (string, bool) {
	if p.Type != llm.PartFile {
		return "", false
	}
	if p.Text != "" {
		return p.Text, true
	}
	if !IsTextType(p.MediaType) {
		return "", false
	}
	if len(p.Data) > 0 {
		if !utf8.Valid(p.Data) {
			return "", false
		}
		return string(p.Data), true
	}
	// An empty text file has neither text nor bytes; one that is only
	// referenced has its bytes elsewhere.
	return "", p.Ref == "" && p.Size == 0
}

// IsTextType reports whether media type mt is text a model reads as
// such: text/*, JSON, XML, YAML, TOML, JavaScript, shell and their +json
// and +xml kin.
func IsTextType(mt string) bool {
	t := BaseType(mt)
	if strings.HasPrefix(t, "text/") || strings.HasSuffix(t, "+json") || strings.HasSuffix(t, "+xml") {
		return true
	}
	switch t {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml",
		"application/javascript", "application/x-javascript", "application/ecmascript", "application/x-sh",
		"application/x-shellscript", "application/sql", "application/graphql", "application/x-ndjson":
		return true
	}
	return false
}

// BaseType is mt without parameters, lower case ("text/plain;
// charset=utf-8" → "text/plain"), as the APIs want it.
func BaseType(mt string) string {
	if t, _, err := mime.ParseMediaType(mt); err == nil {
		return t
	}
	return strings.ToLower(strings.TrimSpace(mt))
}
