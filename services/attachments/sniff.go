package attachments

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
)

// Sniff returns the media type of data: what its bytes are, with declared
// (the sender's claim, may be empty) used only to name a text format more
// precisely. A declared image whose bytes are not an image is refused with
// MediaMismatch; name is the part's name for the error.
func Sniff(data []byte, declared, name string) (string, error) {
	sniffed := detect(data)
	want := baseType(declared)
	if strings.HasPrefix(want, "image/") && !strings.HasPrefix(sniffed, "image/") {
		return "", errs.New(MediaMismatch, fmt.Sprintf(
			"attachment %s is declared %s but its bytes are %s; send the image itself, or declare what the file is", label(name), want, sniffed))
	}
	if isText(sniffed) && want != "" && isText(want) {
		return want, nil
	}
	return sniffed, nil
}

// detect names the bytes: http.DetectContentType without its parameters,
// plus the formats it does not know.
func detect(data []byte) string {
	t := baseType(http.DetectContentType(data))
	switch {
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "image/webp"
	case t == "text/xml" || t == "text/plain":
		if looksSVG(data) {
			return "image/svg+xml"
		}
		if t == "text/plain" && !utf8.Valid(data) {
			// DetectContentType says text/plain for Latin-1 text too, but
			// also for short binary without NULs: only valid UTF-8 is
			// taken as text.
			return "application/octet-stream"
		}
	}
	return t
}

func looksSVG(data []byte) bool {
	head := data[:min(len(data), 512)]
	return bytes.Contains(head, []byte("<svg"))
}

// isText reports whether a media type is text a model can read inline.
func isText(t string) bool {
	switch {
	case strings.HasPrefix(t, "text/"):
		return true
	case t == "application/json", t == "application/xml", t == "application/x-yaml", t == "application/yaml",
		t == "application/javascript", t == "application/toml":
		return true
	}
	return false
}

// IsText reports whether parts of media type t hold text (the file's
// content goes in Part.Text, and providers may inline it).
func IsText(t string) bool { return isText(baseType(t)) }

func baseType(t string) string {
	if t == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(t)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(t))
	}
	return mt
}

func label(name string) string {
	if name == "" {
		return "(unnamed)"
	}
	return fmt.Sprintf("%q", name)
}
