package anthropic_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/internal/llmtest"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

var (
	png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	pdf = []byte("%PDF-1.7\n1 0 obj\n<<>>\nendobj\n")
)

// sentMessages sends req and returns the messages of the request body as
// raw JSON, for exact comparison.
func sentMessages(t *testing.T, req llm.Request) []json.RawMessage {
	t.Helper()
	s, rec := llmtest.Serve(t, "testdata", llmtest.Answer{File: "text.sse"})
	if _, _, err := llmtest.Collect(provider(t, s, 0), req); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(rec.Requests()[0], &body); err != nil {
		t.Fatal(err)
	}
	return body.Messages
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// TestPartsBecomeImageAndDocumentBlocks: an image is an image block with a
// base64 source and its media type, a PDF a base64 document, a text file a
// plain-text document titled with its name; text parts stay text blocks in
// order, an empty one is dropped.
func TestPartsBecomeImageAndDocumentBlocks(t *testing.T) {
	msgs := sentMessages(t, llm.Request{History: llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "what is this?", Parts: []llm.Part{
		{Type: llm.PartText, Text: "what is this?"},
		{Type: llm.PartImage, MediaType: "image/png", Name: "shot.png", Ref: "sha256:aa", Data: png},
		{Type: llm.PartText},
		{Type: llm.PartFile, MediaType: "application/pdf", Name: "spec.pdf", Ref: "sha256:bb", Data: pdf},
		{Type: llm.PartFile, MediaType: "text/markdown; charset=utf-8", Name: "notes.md", Text: "# Notes\n"},
		{Type: llm.PartFile, MediaType: "application/json", Name: "data.json", Ref: "sha256:cc", Data: []byte(`{"a":1}`)},
	}})})
	want := `{"role":"user","content":[{"type":"text","text":"what is this?"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + b64(png) + `"}},` +
		`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + b64(pdf) + `"},"title":"spec.pdf"},` +
		`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"# Notes\n"},"title":"notes.md"},` +
		`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"{\"a\":1}"},"title":"data.json"}]}`
	if len(msgs) != 1 || string(msgs[0]) != want {
		t.Fatalf("sent %s\nwant %s", msgs, want)
	}
}

// TestToolResultCarriesImage: a tool's image result is a tool_result whose
// content is blocks (text, then the image), in the user message after the
// tool call.
func TestToolResultCarriesImage(t *testing.T) {
	msgs := sentMessages(t, llm.Request{History: llm.NewHistory(
		llm.Message{Role: llm.RoleUser, Content: "look at logo.png"},
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t1", Name: "read", Arguments: `{"path":"logo.png"}`}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Content: "logo.png (12 bytes)", Parts: []llm.Part{
			{Type: llm.PartText, Text: "logo.png (12 bytes)"},
			{Type: llm.PartImage, MediaType: "image/webp", Data: png},
		}},
	)})
	want := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"logo.png (12 bytes)"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/webp","data":"` + b64(png) + `"}}]}]}`
	if len(msgs) != 3 || string(msgs[2]) != want {
		t.Fatalf("sent %s\nwant %s", msgs, want)
	}
}

// TestPartsRefusedBeforeTheRequest: an image without its bytes, a text
// file without its text and a binary file are errors naming the provider,
// the model and the part, and no request leaves.
func TestPartsRefusedBeforeTheRequest(t *testing.T) {
	for _, c := range []struct {
		part llm.Part
		code errs.Code
		says string
	}{
		{llm.Part{Type: llm.PartImage, MediaType: "image/png", Ref: "sha256:aa", Size: 12}, parts.Unresolved, "sha256:aa"},
		{llm.Part{Type: llm.PartFile, MediaType: "text/plain", Name: "a.txt", Ref: "sha256:bb", Size: 3}, parts.Unresolved, `"a.txt"`},
		{llm.Part{Type: llm.PartFile, MediaType: "application/zip", Name: "a.zip", Data: []byte("PK\x03\x04")}, parts.Unsupported, "application/zip"},
		{llm.Part{Type: llm.PartImage, MediaType: "image/tiff", Data: []byte("II*\x00")}, parts.Unsupported, "image/tiff"},
	} {
		s, rec := llmtest.Serve(t, "testdata", llmtest.Answer{File: "text.sse"})
		req := llm.Request{History: llm.NewHistory(
			llm.Message{Role: llm.RoleUser, Content: "hi"},
			llm.Message{Role: llm.RoleAssistant, Content: "hello"},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "see"}, c.part}},
		)}
		_, _, err := llmtest.Collect(provider(t, s, 0), req)
		if !errs.HasCode(err, c.code) {
			t.Fatalf("%s: want %s, got %v", c.says, c.code, err)
		}
		for _, want := range []string{`"anthropic"`, `"claude-test"`, "part 1 of message 2", c.says} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %s", err, want)
			}
		}
		if n := len(rec.Requests()); n != 0 {
			t.Fatalf("%s: %d requests sent", c.says, n)
		}
	}
}

func TestCapabilities(t *testing.T) {
	s, _ := llmtest.Serve(t, "testdata", llmtest.Answer{File: "text.sse"})
	if c := parts.Of(provider(t, s, 0), "claude-test"); !c.Images || !c.Documents {
		t.Fatalf("anthropic takes images and PDFs, says %+v", c)
	}
}

// TestToolResultNotesWhatItCannotSend: a file a tool returned that the API
// cannot take is a note in the result, not a refusal that would fail every
// later request of the conversation.
func TestToolResultNotesWhatItCannotSend(t *testing.T) {
	msgs := sentMessages(t, llm.Request{History: llm.NewHistory(
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t1", Name: "read", Arguments: `{}`}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Parts: []llm.Part{{Type: llm.PartFile, MediaType: "application/zip", Name: "a.zip", Size: 4}}},
	)})
	want := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"[file application/zip \"a.zip\", 4 bytes omitted: model \"claude-test\" of provider \"anthropic\" cannot take it]"}]}]}`
	if len(msgs) != 2 || string(msgs[1]) != want {
		t.Fatalf("sent %s\nwant %s", msgs, want)
	}
}
