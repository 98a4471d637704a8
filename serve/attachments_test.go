package serve_test

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/attachments"
)

// pngOf is a small real PNG; seed makes different bytes.
func pngOf(t *testing.T, seed uint8) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for i := range img.Pix {
		img.Pix[i] = seed + uint8(i)
	}
	img.Set(0, 0, color.RGBA{seed, 1, 2, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// upload is one file of a multipart message.
type upload struct {
	name, mediaType string
	data            []byte
}

// form builds a multipart message: its text fields, then its files.
func form(t testing.TB, fields map[string]string, files ...upload) (body, contentType string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for k, v := range fields {
		w.WriteField(k, v)
	}
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+f.name+`"`)
		if f.mediaType != "" {
			h.Set("Content-Type", f.mediaType)
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write(f.data)
	}
	w.Close()
	return b.String(), w.FormDataContentType()
}

func (e *env) postForm(id string, fields map[string]string, files ...upload) response {
	e.t.Helper()
	body, ct := form(e.t, fields, files...)
	return e.call("POST", "/v1/sessions/"+id+"/messages", body, "Content-Type", ct)
}

// partOut is a part as the history shows it.
type partOut struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	MediaType string `json:"media_type"`
	Name      string `json:"name"`
	Ref       string `json:"ref"`
	Size      int64  `json:"size"`
}

type messageOut struct {
	Type    string `json:"type"`
	Message *struct {
		Role    string    `json:"role"`
		Content string    `json:"content"`
		Parts   []partOut `json:"parts"`
	} `json:"message"`
}

// messages returns the user and assistant messages of the history.
func (e *env) messages(id string) (user, assistant []messageOut) {
	e.t.Helper()
	r := e.call("GET", "/v1/sessions/"+id+"/events", nil)
	var page struct {
		Events []messageOut `json:"events"`
	}
	r.json(e.t, &page)
	for _, ev := range page.Events {
		switch ev.Type {
		case "user/message":
			user = append(user, ev)
		case "assistant/message":
			assistant = append(assistant, ev)
		}
	}
	return user, assistant
}

func (e *env) attachmentStore() *attachments.Store {
	e.t.Helper()
	st, err := attachments.Key.Get(e.h.Root())
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// A multipart upload reaches the model with its bytes (the scripted model
// echoes each part's type, sniffed media type and size), the log keeps
// references, and the attachments route serves each part's bytes to this
// session only, with headers that keep a browser from running them.
func TestUploadReachesTheModelAndIsServedToItsSessionOnly(t *testing.T) {
	e := newEnv(t, envOpts{})
	id := e.open(map[string]any{"session_id": "up-1"})
	shot, notes := pngOf(t, 1), []byte("# notes\nthe cache evicts too early\n")
	r := e.postForm(id, map[string]string{"request_id": "u1", "content": "look"},
		upload{"shot.png", "image/png", shot}, upload{"dir/notes.md", "", notes})
	if r.status != http.StatusAccepted {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	e.waitEvents(id, "turn end", turnsEnded(1))
	user, assistant := e.messages(id)
	want := "You said: look [image image/png, " + strconv.Itoa(len(shot)) + " bytes] [file text/plain, " + strconv.Itoa(len(notes)) + " bytes]"
	if len(assistant) != 1 || assistant[0].Message.Content != want {
		t.Fatalf("the model answered %+v; want %q", assistant, want)
	}
	if len(user) != 1 || len(user[0].Message.Parts) != 3 {
		t.Fatalf("user messages: %+v", user)
	}
	img, file := user[0].Message.Parts[1], user[0].Message.Parts[2]
	if img.Type != "image" || img.Ref != attachments.RefOf(shot) || img.Name != "shot.png" || img.Size != int64(len(shot)) ||
		file.Type != "file" || file.Name != "notes.md" || file.Ref != attachments.RefOf(notes) {
		t.Fatalf("the log keeps the parts as %+v and %+v", img, file)
	}

	base := "/v1/sessions/" + id + "/attachments/"
	got := e.call("GET", base+img.Ref, nil)
	if got.status != 200 || !bytes.Equal(got.body, shot) {
		t.Fatalf("the image: %d, %d bytes", got.status, len(got.body))
	}
	for k, v := range map[string]string{"Content-Type": "image/png", "X-Content-Type-Options": "nosniff", "ETag": `"` + img.Ref + `"`, "Content-Disposition": ""} {
		if got.header.Get(k) != v {
			t.Errorf("the image's %s is %q; want %q", k, got.header.Get(k), v)
		}
	}
	if csp := got.header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") {
		t.Errorf("the image's CSP is %q; it must sandbox", csp)
	}
	if r := e.call("GET", base+img.Ref, nil, "If-None-Match", `"`+img.Ref+`"`); r.status != http.StatusNotModified || len(r.body) != 0 {
		t.Errorf("a revalidation: %d %q", r.status, r.body)
	}
	got = e.call("GET", base+file.Ref, nil)
	if got.status != 200 || !bytes.Equal(got.body, notes) || got.header.Get("Content-Disposition") != `attachment; filename=notes.md` ||
		got.header.Get("Content-Type") != "text/plain" {
		t.Fatalf("the file: %d %s %q", got.status, got.header, got.body)
	}

	// Another session never reads the blob, though the store holds it.
	other := e.open(map[string]any{"session_id": "up-2"})
	if r := e.call("GET", "/v1/sessions/"+other+"/attachments/"+img.Ref, nil); r.status != 404 || r.err(t).Code != string(attachments.NotFound) {
		t.Fatalf("another session's attachment: %d %s", r.status, r.body)
	}
	if r := e.call("GET", base+"sha256:nothex", nil); r.status != 400 || r.err(t).Code != "SERVE_BAD_REQUEST" {
		t.Fatalf("a malformed ref: %d %s", r.status, r.body)
	}
	if r := e.raw("GET", base+img.Ref, nil, http.Header{}); r.status != 401 {
		t.Fatalf("without a token: %d", r.status)
	}

	// A closed session's history still shows its images.
	if r := e.call("POST", "/v1/sessions/"+id+"/close", nil); r.status != 200 {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if r := e.call("GET", base+img.Ref, nil); r.status != 200 || !bytes.Equal(r.body, shot) {
		t.Fatalf("the image of a closed session: %d %s", r.status, r.body)
	}
}

// A retried upload (same request_id) answers the original message id and
// stores nothing: not even different bytes sent under that id. Deleting
// the session then leaves no blob behind, so no second reference was
// kept.
func TestUploadRetryIsDeliveredOnceAndStoresNothingTwice(t *testing.T) {
	e := newEnv(t, envOpts{})
	store := e.attachmentStore()
	id := e.open(map[string]any{"session_id": "retry-1"})
	first, second := pngOf(t, 10), pngOf(t, 20)
	ids := make([]string, 2)
	for i, data := range [][]byte{first, second} {
		r := e.postForm(id, map[string]string{"request_id": "same"}, upload{"a.png", "image/png", data})
		if r.status != http.StatusAccepted {
			t.Fatalf("upload %d: %d %s", i, r.status, r.body)
		}
		var out struct {
			MessageID string `json:"message_id"`
		}
		r.json(t, &out)
		ids[i] = out.MessageID
	}
	if ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("message ids %q; the retry must answer the original", ids)
	}
	e.waitEvents(id, "turn end", turnsEnded(1))
	written := store.Written()
	if store.Has(attachments.RefOf(second)) {
		t.Fatal("the retry's bytes were stored")
	}
	if written != int64(len(first)) {
		t.Fatalf("%d bytes written to the store; want the first upload's %d", written, len(first))
	}
	if user, _ := e.messages(id); len(user) != 1 {
		t.Fatalf("%d user messages", len(user))
	}
	e.call("POST", "/v1/sessions/"+id+"/close", nil)
	if r := e.call("DELETE", "/v1/sessions/"+id, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if store.Has(attachments.RefOf(first)) {
		t.Fatal("the blob outlived its only session: a reference was kept twice")
	}
}

// Base64 parts in JSON reach the model like uploaded files.
func TestUploadJSONPartsReachTheModel(t *testing.T) {
	e := newEnv(t, envOpts{})
	id := e.open(nil)
	shot := pngOf(t, 3)
	r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]any{
		"request_id": "j1", "content": "see",
		"parts": []map[string]any{{"type": "file", "name": "x.bin", "data": shot}}, // []byte marshals as base64
	})
	if r.status != http.StatusAccepted {
		t.Fatalf("%d %s", r.status, r.body)
	}
	e.waitEvents(id, "turn end", turnsEnded(1))
	_, assistant := e.messages(id)
	if want := "You said: see [image image/png, " + strconv.Itoa(len(shot)) + " bytes]"; len(assistant) != 1 || assistant[0].Message.Content != want {
		t.Fatalf("the model answered %+v; want %q", assistant, want)
	}
}

// Refused uploads answer their codes with documented statuses and store
// nothing: over a part's or the message's limit, over the body limit
// (multipart: the attachments' limit plus max_body_bytes; JSON:
// max_body_bytes), bytes that are not the image they claim to be, an
// unknown field.
func TestUploadRefusals(t *testing.T) {
	e := newEnv(t, envOpts{serve: "  max_body_bytes: 1000\nattachments:\n  max_part_bytes: 1000\n  max_message_bytes: 1500\n"})
	store := e.attachmentStore()
	id := e.open(nil)
	blob := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	for _, c := range []struct {
		name   string
		fields map[string]string
		files  []upload
		status int
		code   string
	}{
		{"a part over its limit", nil, []upload{{"big.bin", "", blob(1200, 1)}}, 413, string(attachments.TooLarge)},
		{"a message over its limit", nil, []upload{{"a.bin", "", blob(800, 2)}, {"b.bin", "", blob(800, 3)}}, 413, string(attachments.TooLarge)},
		{"a body over the upload limit", nil, []upload{{"huge.bin", "", blob(3000, 4)}}, 413, "SERVE_BODY_TOO_LARGE"},
		{"text declared an image", nil, []upload{{"fake.png", "image/png", []byte("not a picture at all")}}, 415, string(attachments.MediaMismatch)},
		{"an unknown field", map[string]string{"prompt": "hi"}, nil, 400, "SERVE_BAD_REQUEST"},
		{"nothing to send", map[string]string{"content": " "}, nil, 400, "SERVE_BAD_REQUEST"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.postForm(id, c.fields, c.files...)
			if r.status != c.status || r.err(t).Code != c.code {
				t.Fatalf("%d %s; want %d %s", r.status, r.body, c.status, c.code)
			}
			for _, f := range c.files {
				if store.Has(attachments.RefOf(f.data)) {
					t.Fatalf("the refused %s was stored", f.name)
				}
			}
		})
	}
	// A JSON body keeps max_body_bytes, though the upload limit is larger.
	r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]any{"parts": []map[string]any{{"type": "file", "data": blob(900, 5)}}})
	if r.status != 413 || r.err(t).Code != "SERVE_BODY_TOO_LARGE" || !strings.Contains(r.err(t).Message, "max_body_bytes") {
		t.Fatalf("a large JSON body: %d %s", r.status, r.body)
	}
	body, _ := json.Marshal(map[string]any{"parts": []map[string]any{{"type": "image", "data": []byte("%PDF-1.4 not an image")}}})
	if r := e.call("POST", "/v1/sessions/"+id+"/messages", string(body)); r.status != 415 || r.err(t).Code != string(attachments.MediaMismatch) {
		t.Fatalf("a JSON image that is not one: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]any{"parts": []map[string]any{{"type": "image", "ref": attachments.RefOf([]byte("x"))}}}); r.status != 400 {
		t.Fatalf("a part naming a ref: %d %s", r.status, r.body)
	}
	if n := store.Written(); n != 0 {
		t.Fatalf("refused uploads wrote %d bytes", n)
	}
}
