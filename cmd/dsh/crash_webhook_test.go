package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
)

// crashServeConfig is a dsh serve config whose scripted model answers
// slowly (a turn runs for seconds), persisting sessions in store (a
// directory for session.jsonl) and the serve state in state, with
// webhooks and schedules added by extra.
func crashServeConfig(t *testing.T, store, state, extra string) string {
	return crashServeConfigWith(t, "  - use: session.jsonl\n    config: {dir: "+store+"}\n", state, extra)
}

// crashServeConfigWith is crashServeConfig with the store's plugin entry.
func crashServeConfigWith(t *testing.T, storeYAML, state, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	cfg := "plugins:\n  - use: llm.scripted\n    config:\n      delay: 30ms\n      replies:\n        - text: \"" + strings.Repeat("slow ", 300) + "\"\n" +
		storeYAML +
		"agents:\n  - id: main\n    provider: scripted\nlog:\n  level: info\n" +
		"serve:\n  no_auth: true\n  state_dir: " + state + "\n" + extra
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// postHook sends body to webhook name signed with secret the GitHub way
// and returns the status and the answer.
func postHook(t *testing.T, base, name, secret, body string) (int, string) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	req, _ := http.NewRequest("POST", base+"/hooks/"+name, strings.NewReader(body))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// crashLine is the part of a session log line these tests read.
type crashLine struct {
	Type      string `json:"type"`
	Turn      int    `json:"turn"`
	Reason    string `json:"reason"`
	RequestID string `json:"request_id"`
	Message   *struct {
		Content string `json:"content"`
	} `json:"message"`
}

// crashLog reads a session log; a missing file is an empty log.
func crashLog(t *testing.T, path string) []crashLine {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []crashLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l crashLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			lines = append(lines, l)
		}
	}
	return lines
}

// prompts counts the user messages of a log by their text.
func crashPrompts(lines []crashLine) map[string]int {
	n := map[string]int{}
	for _, l := range lines {
		if l.Type == "user/message" && l.Message != nil {
			n[l.Message.Content]++
		}
	}
	return n
}

// crashWait polls the log at path until ok holds of its lines.
func crashWait(t *testing.T, path, what string, ok func([]crashLine) bool, p *serveProcess) []crashLine {
	t.Helper()
	return crashWaitFor(t, what, func() []crashLine { return crashLog(t, path) }, ok, p)
}

// crashWaitFor polls read until ok holds of the lines it returns.
func crashWaitFor(t *testing.T, what string, read func() []crashLine, ok func([]crashLine) bool, p *serveProcess) []crashLine {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lines := read()
		if ok(lines) {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened; log:\n%v\nstderr:\n%s", what, lines, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// apiLog reads session id's durable events through the API of p, open or
// stored.
func apiLog(t *testing.T, p *serveProcess, id string) []crashLine {
	t.Helper()
	code, out := apiCall(t, p.base, "GET", "/v1/sessions/"+id+"/events?after=0&limit=1000", "")
	if code != http.StatusOK {
		return nil
	}
	var page struct {
		Events []crashLine `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("events of %s: %v\n%s", id, err, out)
	}
	return page.Events
}

// kill ends a dsh serve with SIGKILL, as a crash would.
func (p *serveProcess) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.copied
	p.cmd.Wait()
}

// TestAWebhookDeliveryAcceptedBeforeAKillRunsAfterTheRestart: a delivery
// answered 202 while the webhook's session runs another delivery's turn
// waits in the agent's inbox, not yet in the log, when dsh serve is
// SIGKILLed. The sender was told it was accepted and will not redeliver;
// after the restart it must still run, once, and the delivery whose turn
// the kill interrupted must not run again. A redelivery of either after
// the restart runs nothing more.
func TestAWebhookDeliveryAcceptedBeforeAKillRunsAfterTheRestart(t *testing.T) {
	t.Run("session.jsonl", func(t *testing.T) {
		store := t.TempDir()
		logPath := filepath.Join(store, "from-ci.jsonl")
		webhookKill(t, "  - use: session.jsonl\n    config: {dir: "+store+"}\n",
			func(*serveProcess) []crashLine { return crashLog(t, logPath) })
	})
	t.Run("session.nats", func(t *testing.T) {
		srv := natstest.Single(t)
		// The killed process's lease on the session outlives it by up to
		// lease_ttl: the restart's redelivery waits it out.
		webhookKill(t, fmt.Sprintf("  - use: session.nats\n    config: {url: %q, stream: CRASH, lease_ttl: 2s}\n", srv.ClientURL()),
			func(p *serveProcess) []crashLine { return apiLog(t, p, "from-ci") })
	})
}

func webhookKill(t *testing.T, storeYAML string, read func(*serveProcess) []crashLine) {
	state := t.TempDir()
	cfg := crashServeConfigWith(t, storeYAML, state, `  shutdown_timeout: 300ms
  webhooks:
    ci:
      secret_env: CI_HOOK_SECRET
      session: from-ci
      prompt: "build {{.Body.build}}"
`)
	env := "CI_HOOK_SECRET=s3cret"
	p := startServe(t, cfg, env)
	if code, out := postHook(t, p.base, "ci", "s3cret", `{"build":1}`); code != http.StatusAccepted {
		t.Fatalf("the first delivery: %d %s", code, out)
	}
	crashWaitFor(t, "the first delivery's turn", func() []crashLine { return read(p) }, func(l []crashLine) bool { return crashPrompts(l)["build 1"] == 1 }, p)
	if code, out := postHook(t, p.base, "ci", "s3cret", `{"build":2}`); code != http.StatusAccepted {
		t.Fatalf("the second delivery: %d %s", code, out)
	}
	if n := crashPrompts(read(p))["build 2"]; n != 0 {
		t.Fatalf("the queued delivery reached the log before the kill (%d); the test needs it queued", n)
	}
	p.kill()

	p = startServe(t, cfg, env)
	crashWaitFor(t, "the accepted delivery's turn after the restart", func() []crashLine { return read(p) }, func(l []crashLine) bool { return crashPrompts(l)["build 2"] >= 1 }, p)
	for _, body := range []string{`{"build":1}`, `{"build":2}`} {
		if code, out := postHook(t, p.base, "ci", "s3cret", body); code != http.StatusAccepted {
			t.Fatalf("the redelivery of %s after the restart: %d %s", body, code, out)
		}
	}
	// Whatever a redelivery would start is in the log by the time its 202
	// is answered, or never.
	lines := read(p)
	n := crashPrompts(lines)
	if n["build 1"] != 1 || n["build 2"] != 1 {
		t.Fatalf("want each delivery once in the log, got %v", n)
	}
	var ends []string
	for _, l := range lines {
		if l.Type == "turn/end" {
			ends = append(ends, fmt.Sprint(l.Turn, ":", l.Reason))
		}
	}
	if len(ends) == 0 || ends[0] != "1:interrupted" {
		t.Fatalf("the killed turn is not closed as interrupted: %v", ends)
	}
	// A clean stop records every outcome; nothing stays in the spool.
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.copied
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("dsh serve exited with %v:\n%s", err, p.log.String())
	}
	if left, _ := filepath.Glob(filepath.Join(state, "webhooks", "*.json")); len(left) != 0 {
		t.Fatalf("deliveries with an outcome stayed in the spool: %v\n%s", left, p.log.String())
	}
}

// TestWebhookDeliveriesKilledRightAfterTheir202RunOnce: deliveries to a
// webhook without session: (each its own session), each followed at once
// — 0 to 20 ms after its 202 — by a SIGKILL of dsh serve and a restart.
// Wherever the kill fell (before the prompt's checkpoint, in the turn,
// after it), every delivery ends up in its own session's log exactly
// once, and the spool is empty once every turn ended.
func TestWebhookDeliveriesKilledRightAfterTheir202RunOnce(t *testing.T) {
	store, state := t.TempDir(), t.TempDir()
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte("plugins:\n  - use: llm.scripted\n  - use: session.jsonl\n    config: {dir: "+store+"}\n"+
		"agents:\n  - id: main\n    provider: scripted\nlog:\n  level: info\n"+
		"serve:\n  no_auth: true\n  state_dir: "+state+"\n  webhooks:\n    fresh:\n      secret_env: HOOK_SECRET\n      prompt: \"fresh {{.Raw}}\"\n"), 0o644)
	env := "HOOK_SECRET=s3cret"
	const tries = 6
	p := startServe(t, path, env)
	for i := range tries {
		if code, out := postHook(t, p.base, "fresh", "s3cret", fmt.Sprintf("delivery %d", i)); code != http.StatusAccepted {
			t.Fatalf("delivery %d: %d %s", i, code, out)
		}
		time.Sleep(time.Duration(i*4) * time.Millisecond)
		p.kill()
		p = startServe(t, path, env)
	}
	for i := range tries {
		body := fmt.Sprintf("delivery %d", i)
		sum := sha256.Sum256([]byte(body))
		logPath := filepath.Join(store, "webhook-fresh-"+hex.EncodeToString(sum[:16])+".jsonl")
		crashWait(t, logPath, "delivery "+fmt.Sprint(i), func(l []crashLine) bool {
			for _, e := range l {
				if e.Type == "turn/end" {
					return true
				}
			}
			return false
		}, p)
		if n := crashPrompts(crashLog(t, logPath))["fresh "+body]; n != 1 {
			t.Fatalf("delivery %d is in its session's log %d times", i, n)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		left, _ := filepath.Glob(filepath.Join(state, "webhooks", "*.json"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries whose turns ended stayed in the spool: %v\n%s", left, p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.kill()
}
