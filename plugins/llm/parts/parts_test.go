package parts_test

import (
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

func TestFileText(t *testing.T) {
	for _, c := range []struct {
		part llm.Part
		text string
		ok   bool
	}{
		{llm.Part{Type: llm.PartFile, MediaType: "application/octet-stream", Text: "held"}, "held", true},
		{llm.Part{Type: llm.PartFile, MediaType: "text/plain; charset=utf-8", Data: []byte("bytes")}, "bytes", true},
		{llm.Part{Type: llm.PartFile, MediaType: "application/vnd.api+json", Data: []byte("{}")}, "{}", true},
		{llm.Part{Type: llm.PartFile, MediaType: "text/plain"}, "", true},
		{llm.Part{Type: llm.PartFile, MediaType: "text/plain", Data: []byte{0xff, 0xfe}}, "", false},
		{llm.Part{Type: llm.PartFile, MediaType: "text/plain", Ref: "sha256:aa", Size: 3}, "", false},
		{llm.Part{Type: llm.PartFile, MediaType: "application/zip", Data: []byte("PK")}, "", false},
		{llm.Part{Type: llm.PartImage, MediaType: "image/png", Text: "not a file"}, "", false},
	} {
		text, ok := parts.FileText(c.part)
		if text != c.text || ok != c.ok {
			t.Errorf("%+v: got %q %v, want %q %v", c.part, text, ok, c.text, c.ok)
		}
	}
}

func TestTakes(t *testing.T) {
	img := llm.Part{Type: llm.PartImage, MediaType: "image/PNG"}
	tiff := llm.Part{Type: llm.PartImage, MediaType: "image/tiff"}
	pdf := llm.Part{Type: llm.PartFile, MediaType: "application/pdf"}
	txt := llm.Part{Type: llm.PartFile, MediaType: "text/csv", Text: "a,b"}
	all, none := parts.Capabilities{Images: true, Documents: true}, parts.Capabilities{}
	if !all.Takes(img) || all.Takes(tiff) || !all.Takes(pdf) || !all.Takes(txt) {
		t.Fatal("images and PDFs: takes PNG, PDF and text, not TIFF")
	}
	if none.Takes(img) || none.Takes(pdf) || !none.Takes(txt) || !none.Takes(llm.Part{Type: llm.PartText}) {
		t.Fatal("text only: takes text and text files only")
	}
}

func ExampleInline() {
	fmt.Println(parts.Inline(llm.Part{Type: llm.PartFile, Name: "todo.txt", MediaType: "text/plain"}, "buy milk"))
	// Output:
	// <file name="todo.txt" media_type="text/plain">
	// buy milk
	// </file>
}
