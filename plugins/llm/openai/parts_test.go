package openai_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/openai"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

var (
	png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	pdf = []byte("%PDF-1.7\n")
)

func pngURL() string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(png) }

// sentMessages sends history and returns the messages of the request body
// as raw JSON, for exact comparison.
func sentMessages(t *testing.T, deepseek bool, history ...llm.Message) []string {
	t.Helper()
	s, rec := server(t, answer{File: "text.sse"})
	if _, _, err := collect(t, provider(t, s, deepseek), llm.Request{History: llm.NewHistory(history...)}); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(rec.Requests()[0], &body); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(body.Messages))
	for i, m := range body.Messages {
		out[i] = string(m)
	}
	return out
}

// TestImagesAsDataURLParts: a user message with an image sends its content
// as parts: text parts, the image as image_url with a data: URL of its
// media type, a text file inlined as a text part.
func TestImagesAsDataURLParts(t *testing.T) {
	msgs := sentMessages(t, false, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
		{Type: llm.PartText, Text: "what is this?"},
		{Type: llm.PartImage, MediaType: "image/png", Ref: "sha256:aa", Data: png},
		{Type: llm.PartFile, MediaType: "text/x-go", Name: "main.go", Text: "package main"},
	}})
	want := `{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"` + pngURL() + `"}},` +
		`{"type":"text","text":"\u003cfile name=\"main.go\" media_type=\"text/x-go\"\u003e\npackage main\n\u003c/file\u003e"}]}`
	if len(msgs) != 1 || msgs[0] != want {
		t.Fatalf("sent %s\nwant %s", msgs, want)
	}
}

// TestTextFilesInlinedAsOneString: without images the content stays one
// string, segments joined by blank lines, for DeepSeek as for OpenAI; a
// text file held as bytes is inlined too.
func TestTextFilesInlinedAsOneString(t *testing.T) {
	for _, deepseek := range []bool{false, true} {
		msgs := sentMessages(t, deepseek, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
			{Type: llm.PartText, Text: "review"},
			{Type: llm.PartFile, MediaType: "text/markdown", Name: "a.md", Ref: "sha256:aa", Data: []byte("# A\n")},
		}})
		want := `{"role":"user","content":"review\n\n\u003cfile name=\"a.md\" media_type=\"text/markdown\"\u003e\n# A\n\u003c/file\u003e"}`
		if len(msgs) != 1 || msgs[0] != want {
			t.Fatalf("deepseek=%v: sent %s\nwant %s", deepseek, msgs, want)
		}
	}
}

// TestToolImagesFollowTheToolMessages: a tool message carries text only,
// so its image is a note there and goes in a user message after the last
// answer to the assistant's calls, never between two of them.
func TestToolImagesFollowTheToolMessages(t *testing.T) {
	msgs := sentMessages(t, false,
		llm.Message{Role: llm.RoleUser, Content: "compare the logos"},
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t1", Name: "read", Arguments: "{}"}, {ID: "t2", Name: "read", Arguments: "{}"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Parts: []llm.Part{{Type: llm.PartText, Text: "a.png"}, {Type: llm.PartImage, MediaType: "image/png", Data: png}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t2", Content: "b.png is missing", IsError: true},
		llm.Message{Role: llm.RoleUser, Content: "well?"},
	)
	want := []string{
		`{"role":"user","content":"compare the logos"}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"read","arguments":"{}"}},{"id":"t2","type":"function","function":{"name":"read","arguments":"{}"}}]}`,
		`{"role":"tool","content":"a.png\n\n[image 1 (image/png) follows in the next user message]","tool_call_id":"t1"}`,
		`{"role":"tool","content":"b.png is missing","tool_call_id":"t2"}`,
		`{"role":"user","content":[{"type":"text","text":"Image 1 returned by tool call t1:"},{"type":"image_url","image_url":{"url":"` + pngURL() + `"}}]}`,
		`{"role":"user","content":"well?"}`,
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sent\n%s\nwant\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	// The images of the last tool run go out too when nothing follows.
	msgs = sentMessages(t, false,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t1", Name: "read", Arguments: "{}"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Parts: []llm.Part{{Type: llm.PartImage, MediaType: "image/png", Data: png}}},
	)
	if len(msgs) != 3 || !strings.Contains(msgs[2], pngURL()) || !strings.HasPrefix(msgs[2], `{"role":"user"`) {
		t.Fatalf("trailing images: %s", msgs)
	}
}

// TestToolImageNotedForDeepSeek: a text-only model's tool result says an
// image was left out instead of refusing, which would fail every later
// request of the conversation.
func TestToolImageNotedForDeepSeek(t *testing.T) {
	msgs := sentMessages(t, true,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t1", Name: "read", Arguments: "{}"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Parts: []llm.Part{{Type: llm.PartImage, MediaType: "image/png", Name: "a.png", Ref: "sha256:aa", Size: 12}}},
	)
	want := `{"role":"tool","content":"[image image/png \"a.png\", 12 bytes omitted: model \"m\" of provider \"deepseek\" cannot take it]","tool_call_id":"t1"}`
	if len(msgs) != 2 || msgs[1] != want {
		t.Fatalf("sent %s\nwant %s", msgs, want)
	}
}

// TestPartsRefusedBeforeTheRequest: DeepSeek refuses an image, OpenAI a
// PDF, both an image without its bytes; the error names the provider, the
// model and the part, and nothing is sent.
func TestPartsRefusedBeforeTheRequest(t *testing.T) {
	for _, c := range []struct {
		deepseek bool
		part     llm.Part
		code     errs.Code
		says     []string
	}{
		{true, llm.Part{Type: llm.PartImage, MediaType: "image/png", Data: png}, parts.Unsupported, []string{`"deepseek"`, "(image, image/png)", "text and text files only"}},
		{false, llm.Part{Type: llm.PartFile, MediaType: "application/pdf", Name: "spec.pdf", Data: pdf}, parts.Unsupported, []string{`"openai"`, `(file, application/pdf, "spec.pdf")`}},
		{false, llm.Part{Type: llm.PartImage, MediaType: "image/jpeg", Ref: "sha256:ff"}, parts.Unresolved, []string{`"openai"`, "sha256:ff"}},
	} {
		s, rec := server(t, answer{File: "text.sse"})
		req := llm.Request{History: llm.NewHistory(llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "see"}, c.part}})}
		_, _, err := collect(t, provider(t, s, c.deepseek), req)
		if !errs.HasCode(err, c.code) {
			t.Fatalf("%v: want %s, got %v", c.says, c.code, err)
		}
		for _, want := range append(c.says, `model "m"`, "part 1 of message 0") {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %s", err, want)
			}
		}
		if n := len(rec.Requests()); n != 0 {
			t.Fatalf("%v: %d requests sent", c.says, n)
		}
	}
}

func TestCapabilities(t *testing.T) {
	s, _ := server(t, answer{File: "text.sse"})
	if c := parts.Of(provider(t, s, false), "m"); !c.Images || c.Documents {
		t.Fatalf("openai takes images, no PDFs; says %+v", c)
	}
	if c := parts.Of(provider(t, s, true), "m"); c.Images || c.Documents {
		t.Fatalf("deepseek takes text only; says %+v", c)
	}
	off := false
	p, err := openai.NewOpenAI(openai.Config{Common: httpx.Common{BaseURL: s.URL, Model: "llama3", RetryBackoff: time.Millisecond}, Images: &off}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c := parts.Of(p, "llama3"); c.Images {
		t.Fatalf("images: false must turn images off; says %+v", c)
	}
}
