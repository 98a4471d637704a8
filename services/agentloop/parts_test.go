package agentloop_test

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

// The provider gets the bytes of a referenced image; the session keeps
// the reference only, in a history the request never changed.
func TestTheModelRequestCarriesTheBytesAndTheHistoryKeepsReferences(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	f, _ := e.root.Plugin(attachments.Plugin, nil)
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	store, _ := attachments.Key.Get(e.root)
	img := []byte("\x89PNG\r\n\x1a\nthe pixels")
	parts, _, err := store.Admit("s1", []llm.Part{{Type: llm.PartText, Text: "what is this?"}, {Type: llm.PartImage, Data: img}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingProvider{}
	e.registerProvider("rec", rec)
	h, _ := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "rec"}})
	defer h.Dispose(stdctx.Background())
	h.Agent.Followup(llm.Message{Role: llm.RoleUser, Content: llm.TextOf(parts), Parts: parts})
	idle(t, h.Agent)
	h.Agent.Followup(user("and now?"))
	idle(t, h.Agent)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, req := range rec.reqs {
		sent := req.History.At(0)
		if len(sent.Parts) != 2 || string(sent.Parts[1].Data) != string(img) {
			t.Fatalf("request %d sent the image part as %+v; want its bytes", i, sent.Parts)
		}
	}
	kept := h.Agent.Session().History().At(0)
	if kept.Parts[1].Data != nil || kept.Parts[1].Ref != parts[1].Ref {
		t.Fatalf("the session's message holds %+v; want the reference without bytes", kept.Parts[1])
	}
}

func TestAMissingAttachmentFailsTheTurnWithAClearError(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	rec := &recordingProvider{}
	e.registerProvider("rec", rec)
	h, _ := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "rec"}})
	defer h.Dispose(stdctx.Background())
	ref := attachments.RefOf([]byte("never stored"))
	h.Agent.Followup(llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartImage, MediaType: "image/png", Ref: ref}}})
	idle(t, h.Agent)
	var end string
	for _, ev := range h.Agent.Session().Events(1) {
		if ev.Error != "" {
			end = ev.Error
		}
	}
	rec.mu.Lock()
	n := len(rec.reqs)
	rec.mu.Unlock()
	if n != 0 || !strings.Contains(end, "attachments service") {
		t.Fatalf("requests %d, turn error %q; want no request and an error naming the missing service", n, end)
	}
}
