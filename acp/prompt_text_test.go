package acp_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/plugins/llm/parts"
)

// A prompt with an image or a resource_link the server reads reaches the
// model with its text once: in the stored message, in what the model
// answers (the scripted model echoes the message's text) and in the
// session's title.
func TestMultimodalPromptCarriesItsTextOnce(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	img := acp.ContentBlock{Image: &acp.ContentBlockImage{Type: "image", Data: png, MimeType: "image/png"}}
	cases := map[string]func(dir string) acp.ContentBlock{
		"image": func(string) acp.ContentBlock { return img },
		"resource_link": func(dir string) acp.ContentBlock {
			f := filepath.Join(dir, "notes.txt")
			if err := os.WriteFile(f, []byte("the notes"), 0o644); err != nil {
				t.Fatal(err)
			}
			return acp.ResourceLinkBlock("notes.txt", "file://"+f)
		},
	}
	for name, block := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOpts{accepts: parts.Capabilities{Images: true}})
			id := e.newSession()
			r, err := e.conn.Prompt(e.ctx(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("what is this"), block(e.dir)}})
			if err != nil || r.StopReason != acp.StopReasonEndTurn {
				t.Fatal(r, err)
			}
			got := agentText(e.c.all())
			if n := strings.Count(got, "what is this"); n != 1 {
				t.Fatalf("the model read the prompt's text %d times: %q", n, got)
			}
			if !strings.Contains(got, " bytes]") {
				t.Fatalf("the model did not get the attachment: %q", got)
			}
			title := e.c.waitFor(t, "title", func(u acp.SessionUpdate) bool {
				return u.SessionInfoUpdate != nil && u.SessionInfoUpdate.Title != nil
			}).SessionInfoUpdate.Title
			if strings.Count(*title, "what is this") != 1 {
				t.Fatalf("title %q", *title)
			}
			data, err := os.ReadFile(filepath.Join(e.store, string(id)+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), "what is thiswhat is this") || strings.Contains(string(data), "what is this\\nwhat is this") {
				t.Fatalf("the stored message has the text twice: %s", data)
			}
		})
	}
}
