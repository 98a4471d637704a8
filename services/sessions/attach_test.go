package sessions_test

import (
	"bytes"
	stdctx "context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// storeCatalog serves the session store, as the host does.
type storeCatalog struct{ st *session.Store }

func (c *storeCatalog) List(ctx stdctx.Context) ([]session.Summary, error) { return c.st.List(ctx) }
func (c *storeCatalog) Delete(ctx stdctx.Context, id string) error         { return c.st.Delete(ctx, id) }

// image is a PNG signature followed by a recognisable payload.
func image(payload string) []byte {
	return append([]byte("\x89PNG\r\n\x1a\n"), strings.Repeat(payload, 64)...)
}

// attachEnv is a persisted env whose session controller and agents share
// one attachments store beside the session files.
func attachEnv(t testing.TB) (*env, *attachments.Store, string) {
	dir := t.TempDir()
	store, err := attachments.Open(filepath.Join(dir, "attachments"), attachments.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cat := &storeCatalog{}
	e := newEnv(t, setup{dir: dir, opts: sessions.Options{Attachments: store, Catalog: cat}})
	cat.st = e.store
	f, err := e.root.Plugin(attachments.Provided(store), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	return e, store, dir
}

// An image prompt end to end: stored once, logged by reference only,
// resolved on resume, released when the session is deleted.
func TestAnImagePromptIsLoggedByReferenceResumedAndDeletedWithItsSession(t *testing.T) {
	e, store, dir := attachEnv(t)
	s := e.open(sessions.OpenOptions{SessionID: "pics"})
	img := image("PIXELS-0123456789")
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r1", Content: "what is this?",
		Parts: []llm.Part{{Type: llm.PartImage, Name: "shot.png", Data: img}}}); err != nil {
		t.Fatal(err)
	}
	e.idle(s)
	if err := s.Detach(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	ref := attachments.RefOf(img)
	raw, err := os.ReadFile(filepath.Join(dir, "pics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("PIXELS-0123456789")) || bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString(img)[:40])) {
		t.Fatal("the session log holds the image's bytes")
	}
	if !bytes.Contains(raw, []byte(ref)) {
		t.Fatal("the session log does not name the image's reference")
	}

	r, err := e.ctl.Resume(stdctx.Background(), "pics", sessions.OpenOptions{Agent: "coder", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	first := e.agent(r).Session().History().At(0)
	if len(first.Parts) != 2 || first.Parts[1].Ref != ref || first.Content != "what is this?" {
		t.Fatalf("the resumed prompt is %+v", first)
	}
	if _, err := r.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r2", Content: "and now?"}); err != nil {
		t.Fatal(err)
	}
	e.idle(r)
	for _, ev := range e.events(r) {
		if ev.Error != "" {
			t.Fatalf("a turn after the resume failed: %s", ev.Error)
		}
	}
	r.Detach(stdctx.Background())

	// A crash between storing and recording: the next start's collection
	// reads the real log, drops the stray blob and keeps the logged one.
	stray := image("STRAY")
	if _, _, err := store.Put("pics", stray); err != nil {
		t.Fatal(err)
	}
	reopened, err := attachments.Open(filepath.Join(dir, "attachments"), attachments.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reopened.Collect(stdctx.Background(), attachments.LogVerifier(e.store), attachments.KnownSessions(e.store)); err != nil {
		t.Fatal(err)
	}
	if reopened.Has(attachments.RefOf(stray)) || !reopened.Has(ref) {
		t.Fatal("the collection kept the stray blob or dropped the logged one")
	}

	if err := e.ctl.Delete(stdctx.Background(), "pics"); err != nil {
		t.Fatal(err)
	}
	if store.Has(ref) {
		t.Fatal("deleting the session left its image")
	}
}

// A refused image prompt leaves nothing in the store; an oversized one is
// refused before admission with the store's code.
func TestARefusedImagePromptLeavesNothingStored(t *testing.T) {
	e, store, dir := attachEnv(t)
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Message.Content == "no" {
			return agentcontroller.Reject("test/no", "not this one", false), nil
		}
		return next.Call(ctx, a)
	})
	s := e.open(sessions.OpenOptions{SessionID: "refused"})
	defer s.Detach(stdctx.Background())
	_, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r1", Content: "no",
		Parts: []llm.Part{{Type: llm.PartImage, Data: image("refused")}}})
	if !errs.HasCode(err, sessions.PromptRejected) {
		t.Fatalf("got %v", err)
	}
	_, err = s.Steer(stdctx.Background(), sessions.PromptRequest{RequestID: "r2",
		Parts: []llm.Part{{Type: llm.PartImage, MediaType: "image/png", Data: []byte("plain text, not a png")}}})
	if !errs.HasCode(err, attachments.MediaMismatch) {
		t.Fatalf("a mislabelled image: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "attachments", "blobs"))
	if len(entries) != 0 || store.Written() == 0 {
		t.Fatalf("blobs left: %d (written %d)", len(entries), store.Written())
	}
}

// A session kept in memory takes its attachments with it when it closes:
// nothing can resume it.
func TestAnUnpersistedSessionReleasesItsAttachmentsWhenItCloses(t *testing.T) {
	e := newEnv(t, setup{})
	f, err := e.root.Plugin(attachments.Plugin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	store, _ := attachments.Key.Get(e.root)
	img := image("MEMORY")
	keep, _, _ := store.Put("someone-else", img) // another session shares the bytes
	s := e.open(sessions.OpenOptions{})
	own := image("OWN")
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r1",
		Parts: []llm.Part{{Type: llm.PartImage, Data: img}, {Type: llm.PartImage, Data: own}}}); err != nil {
		t.Fatal(err)
	}
	e.idle(s)
	if !store.Has(attachments.RefOf(own)) {
		t.Fatal("the prompt's image is not stored")
	}
	if err := s.Detach(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if store.Has(attachments.RefOf(own)) {
		t.Fatal("the closed in-memory session left its image")
	}
	if !store.Has(keep) {
		t.Fatal("closing the session took an image another session references")
	}
}
