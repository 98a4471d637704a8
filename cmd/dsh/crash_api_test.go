package main

import (
	"encoding/base64"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
// it) and never runs twice; a message that still waited in the inbox has
// no record, and its retry under the same request id, once the session is
// resumed, delivers it once.
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

// TestAnAttachmentQueuedAtAKillIsCollectedThenSentAgain: a message with a
// file, queued behind a running turn, has its bytes stored but no log
// event when dsh serve is SIGKILLed. The restart collects the blob no log
// names (docs/attachments.md); the message's retry after the session's
// resume stores it again and records it once, by reference.
func TestAnAttachmentQueuedAtAKillIsCollectedThenSentAgain(t *testing.T) {
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
	deadline := time.Now().Add(20 * time.Second)
	for blobCount(t, store) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the blob no log names was not collected at the restart:\n%s", p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/a1/resume", ``); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, out)
	}
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/a1/messages", m2); code != http.StatusAccepted {
		t.Fatalf("m2 retried: %d %s", code, out)
	}
	lines := crashWait(t, logPath, "m2's turn", func(l []crashLine) bool { return crashPrompts(l)["see the notes"] >= 1 }, p)
	if n := crashPrompts(lines); n["see the notes"] != 1 || n["first"] != 1 {
		t.Fatalf("want each message once, got %v", n)
	}
	raw, _ := os.ReadFile(logPath)
	if !strings.Contains(string(raw), `"ref":"sha256:`) || blobCount(t, store) != 1 {
		t.Fatalf("the retried message's file is not stored and referenced once (%d blobs):\n%s", blobCount(t, store), raw)
	}
	p.kill()
}
