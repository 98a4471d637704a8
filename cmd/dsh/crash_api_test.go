package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apiCall sends an unauthenticated API request (serve.no_auth) and
// returns the status and the answer.
func apiCall(t *testing.T, base, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// TestAPIMessagesAcrossAKill holds docs/serve.md's promise for the HTTP
// API across a SIGKILL of dsh serve: a message whose turn had started is
// answered from the log after the restart (202 with the turn that took
// it) and never runs twice; a message that still waited in the inbox is
// recorded as queued, the session's resume runs it, and its retry under
// the same request id delivers it no second time.
func TestAPIMessagesAcrossAKill(t *testing.T) {
	store, state := t.TempDir(), t.TempDir()
	cfg := crashServeConfig(t, store, state, "")
	logPath := filepath.Join(store, "k1.jsonl")
	p := startServe(t, cfg)
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions", `{"session_id":"k1"}`); code != http.StatusCreated {
		t.Fatalf("open: %d %s", code, out)
	}
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/k1/messages", `{"request_id":"m1","content":"first"}`); code != http.StatusAccepted {
		t.Fatalf("m1: %d %s", code, out)
	}
	crashWait(t, logPath, "m1's turn", func(l []crashLine) bool { return crashPrompts(l)["first"] == 1 }, p)
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/k1/messages", `{"request_id":"m2","content":"second"}`); code != http.StatusAccepted {
		t.Fatalf("m2: %d %s", code, out)
	}
	p.kill()

	p = startServe(t, cfg)
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/k1/messages", `{"request_id":"m1","content":"first"}`); code != http.StatusConflict || !strings.Contains(out, "SESSION_CLOSED") {
		t.Fatalf("a message to the session before its resume: %d %s", code, out)
	}
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/k1/resume", ``); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, out)
	}
	code, out := apiCall(t, p.base, "POST", "/v1/sessions/k1/messages", `{"request_id":"m1","content":"first"}`)
	if code != http.StatusAccepted || !strings.Contains(out, `"delivered"`) || !strings.Contains(out, `"turn":1`) {
		t.Fatalf("m1 retried after the restart: %d %s; want 202 from the record of turn 1", code, out)
	}
	code, out = apiCall(t, p.base, "POST", "/v1/sessions/k1/messages", `{"request_id":"m2","content":"second"}`)
	if code != http.StatusAccepted {
		t.Fatalf("m2 retried after the restart: %d %s", code, out)
	}
	lines := crashWait(t, logPath, "m2's turn", func(l []crashLine) bool { return crashPrompts(l)["second"] >= 1 }, p)
	if n := crashPrompts(lines); n["first"] != 1 || n["second"] != 1 {
		t.Fatalf("want each message once in the log, got %v", n)
	}
	// m2 again: now answered from its record, as taken by turn 2.
	code, out = apiCall(t, p.base, "POST", "/v1/sessions/k1/messages", `{"request_id":"m2","content":"second"}`)
	if code != http.StatusAccepted || !strings.Contains(out, `"turn":2`) {
		t.Fatalf("m2 retried once more: %d %s", code, out)
	}
	if n := crashPrompts(crashLog(t, logPath)); n["second"] != 1 {
		t.Fatalf("m2 ran %d times", n["second"])
	}
	p.kill()
}

// blobCount counts the attachment blobs stored beside the sessions.
func blobCount(t *testing.T, store string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(filepath.Join(store, "attachments", "blobs"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestAnAttachmentQueuedAtAKillIsKeptAndRunsOnce: a message with a file,
// queued behind a running turn, is recorded as queued, naming its blob,
// before its 202, so the SIGKILL that follows loses neither: the restart
// keeps the blob the log names (docs/attachments.md), the session's resume
// runs the message once by reference, and its retry stores nothing more.
func TestAnAttachmentQueuedAtAKillIsKeptAndRunsOnce(t *testing.T) {
	store, state := t.TempDir(), t.TempDir()
	cfg := crashServeConfig(t, store, state, "")
	logPath := filepath.Join(store, "a1.jsonl")
	p := startServe(t, cfg)
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions", `{"session_id":"a1"}`); code != http.StatusCreated {
		t.Fatalf("open: %d %s", code, out)
	}
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/a1/messages", `{"request_id":"m1","content":"first"}`); code != http.StatusAccepted {
		t.Fatalf("m1: %d %s", code, out)
	}
	crashWait(t, logPath, "m1's turn", func(l []crashLine) bool { return crashPrompts(l)["first"] == 1 }, p)
	data := base64.StdEncoding.EncodeToString([]byte("the notes of a crash test\n"))
	m2 := `{"request_id":"m2","content":"see the notes","parts":[{"type":"file","name":"notes.txt","data":"` + data + `"}]}`
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/a1/messages", m2); code != http.StatusAccepted {
		t.Fatalf("m2: %d %s", code, out)
	}
	if n := blobCount(t, store); n != 1 {
		t.Fatalf("the queued message's file is stored %d times before the kill; want once", n)
	}
	p.kill()

	p = startServe(t, cfg)
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/a1/resume", ``); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, out)
	}
	crashWait(t, logPath, "m2's turn", func(l []crashLine) bool { return crashPrompts(l)["see the notes"] >= 1 }, p)
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/a1/messages", m2); code != http.StatusAccepted {
		t.Fatalf("m2 retried: %d %s", code, out)
	}
	if n := crashPrompts(crashLog(t, logPath)); n["see the notes"] != 1 || n["first"] != 1 {
		t.Fatalf("want each message once, got %v", n)
	}
	raw, _ := os.ReadFile(logPath)
	if !strings.Contains(string(raw), `"ref":"sha256:`) || blobCount(t, store) != 1 {
		t.Fatalf("the queued message's file is not kept and referenced once (%d blobs):\n%s", blobCount(t, store), raw)
	}
	p.kill()
}

// TestAQueuedMessageIsRecordedBeforeIts202: a message queued behind a
// running turn is in the log before its sender hears 202, so a SIGKILL
// right after the answer does not lose it. Resuming the session runs it
// once, with no retry, and a retry under its request id is answered with
// the message id of the first 202, never delivering it a second time.
func TestAQueuedMessageIsRecordedBeforeIts202(t *testing.T) {
	store, state := t.TempDir(), t.TempDir()
	cfg := crashServeConfig(t, store, state, "")
	logPath := filepath.Join(store, "q1.jsonl")
	p := startServe(t, cfg)
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions", `{"session_id":"q1"}`); code != http.StatusCreated {
		t.Fatalf("open: %d %s", code, out)
	}
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/q1/messages", `{"request_id":"m1","content":"first"}`); code != http.StatusAccepted {
		t.Fatalf("m1: %d %s", code, out)
	}
	crashWait(t, logPath, "m1's turn", func(l []crashLine) bool { return crashPrompts(l)["first"] == 1 }, p)
	code, first := apiCall(t, p.base, "POST", "/v1/sessions/q1/messages", `{"request_id":"m2","content":"second"}`)
	if code != http.StatusAccepted {
		t.Fatalf("m2: %d %s", code, first)
	}
	p.kill()

	queued := 0
	for _, l := range crashLog(t, logPath) {
		if l.RequestID == "m2" {
			if l.Type != "message/queued" || l.Message == nil || l.Message.Content != "second" {
				t.Fatalf("m2 is recorded as %+v before its turn; want message/queued with its message", l)
			}
			queued++
		}
	}
	if queued != 1 {
		t.Fatalf("m2 was answered 202 but the log holds %d records of it at the kill; want one message/queued", queued)
	}

	p = startServe(t, cfg)
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/q1/resume", ``); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, out)
	}
	crashWait(t, logPath, "m2's turn after the resume", func(l []crashLine) bool { return crashPrompts(l)["second"] >= 1 }, p)
	code, again := apiCall(t, p.base, "POST", "/v1/sessions/q1/messages", `{"request_id":"m2","content":"second"}`)
	if code != http.StatusAccepted || jsonField(t, again, "message_id") != jsonField(t, first, "message_id") {
		t.Fatalf("m2 retried after the resume: %d %s; want 202 with the first answer's message id (%s)", code, again, first)
	}
	crashWait(t, logPath, "m2's turn's end", func(l []crashLine) bool {
		for _, x := range l {
			if x.Type == "turn/end" && x.Turn == 2 {
				return true
			}
		}
		return false
	}, p)
	if n := crashPrompts(crashLog(t, logPath)); n["first"] != 1 || n["second"] != 1 {
		t.Fatalf("want each message once in the log, got %v", n)
	}
	p.kill()
}

// jsonField reads a string field of a JSON object.
func jsonField(t *testing.T, body, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%q is not JSON: %v", body, err)
	}
	s, _ := m[field].(string)
	if s == "" {
		t.Fatalf("%s has no %q", body, field)
	}
	return s
}
