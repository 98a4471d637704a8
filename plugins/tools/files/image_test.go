package files

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/llm"
)

// Reading a PNG gives the model the image, not binary garbage or a
// refusal; other binary files are still refused.
func TestReadReturnsAnImageAsAnImagePart(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"
	ws := tree(t, map[string]string{"shot.png": png, "blob.bin": "\x00\x01\x02binary"})
	r := run(t, Config{}, "read", ws, map[string]any{"path": "shot.png"})
	if r.IsError || len(r.Parts) != 1 || r.Parts[0].Type != llm.PartImage || r.Parts[0].MediaType != "image/png" ||
		string(r.Parts[0].Data) != png || !strings.Contains(r.Content, "image") {
		t.Fatalf("read of a PNG: %+v", r)
	}
	r = run(t, Config{}, "read", ws, map[string]any{"path": "blob.bin"})
	if !r.IsError || len(r.Parts) != 0 || !strings.Contains(r.Content, "binary") {
		t.Fatalf("read of a binary file: %+v", r)
	}
}
