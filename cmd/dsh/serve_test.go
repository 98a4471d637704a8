package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer collects a process's stderr while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) add(line string) {
	s.mu.Lock()
	s.b.WriteString(line + "\n")
	s.mu.Unlock()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveProcess is a dsh serve started by a test.
type serveProcess struct {
	base   string // http://host:port
	cmd    *exec.Cmd
	log    *syncBuffer
	copied chan struct{} // closed when stderr is read to its end
}

// startServe starts dsh serve on a free loopback port with env added to
// the environment and waits for the line that says where it listens. The
// process is killed when the test ends.
func startServe(t *testing.T, cfg string, env ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(dshBin, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = append(append(os.Environ(), "DSH_CONFIG="), env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &serveProcess{cmd: cmd, log: &syncBuffer{}, copied: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(p.copied)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.log.add(sc.Text())
			if rest, ok := strings.CutPrefix(sc.Text(), "dsh serve: listening on http://"); ok {
				addr <- strings.Fields(rest)[0]
			}
		}
	}()
	select {
	case a := <-addr:
		p.base = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("no listening line:\n%s", p.log.String())
	}
	return p
}

// TestServeEndToEnd runs the built binary as a server: a session is opened
// and prompted over HTTP, and SIGTERM arrives mid-answer. The turn is
// cancelled at the shutdown deadline, the session log ends with a
// turn/end, dsh exits 0 and never prints the token.
func TestServeEndToEnd(t *testing.T) {
	store := t.TempDir()
	token := "e2e-token-8c1f5d0a9b"
	cfg := writeConfig(t, "        - text: \""+strings.Repeat("slow ", 400)+"\"\n",
		"  - use: session.jsonl\n    config: {dir: "+store+"}\n")
	// A delay between chunks keeps the turn running when SIGTERM comes.
	b, _ := os.ReadFile(cfg)
	yaml := strings.Replace(string(b), "    config:\n      replies:", "    config:\n      delay: 20ms\n      replies:", 1) + "serve:\n  shutdown_timeout: 300ms\n"
	os.WriteFile(cfg, []byte(yaml), 0o644)

	p := startServe(t, cfg, "DSH_SERVE_TOKEN="+token)
	base, cmd, log := p.base, p.cmd, p.log

	call := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	if code, _ := call("GET", "/v1/sessions", ""); code != 200 {
		t.Fatalf("list: %d", code)
	}
	code, out := call("POST", "/v1/sessions", `{"session_id":"e2e"}`)
	if code != 201 {
		t.Fatalf("open: %d %s", code, out)
	}
	req, _ := http.NewRequest("GET", base+"/v1/sessions/e2e/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if code, out := call("POST", "/v1/sessions/e2e/messages", `{"request_id":"e2e-1","content":"talk slowly"}`); code != 202 {
		t.Fatalf("message: %d %s", code, out)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "event: chunk" {
	}

	cmd.Process.Signal(syscall.SIGTERM)
	// The stream ends with the shutdown.
	for sc.Scan() {
	}
	done := make(chan error, 1)
	go func() { <-p.copied; done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dsh serve exited with %v:\n%s", err, log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("dsh serve did not exit:\n%s", log.String())
	}
	if strings.Contains(log.String(), token) {
		t.Fatalf("the token is on stderr:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "dsh serve: shutting down") {
		t.Fatalf("stderr:\n%s", log.String())
	}
	data, err := os.ReadFile(filepath.Join(store, "e2e.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var last struct{ Type, Reason string }
	json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if last.Type != "turn/end" || last.Reason == "completed" {
		t.Fatalf("the session log ends with %s", lines[len(lines)-1])
	}
}

// Without a token dsh serve refuses to start and says how to set one.
func TestServeWantsAToken(t *testing.T) {
	cfg := writeConfig(t, "        - text: hi\n", "")
	cmd := exec.Command(dshBin, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=", "DSH_SERVE_TOKEN=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "$DSH_SERVE_TOKEN is unset or empty") {
		t.Fatalf("%v: %s", err, out)
	}
	// no_auth is refused off loopback even when the config allows it.
	cfgNoAuth := writeConfig(t, "        - text: hi\n", "")
	b, _ := os.ReadFile(cfgNoAuth)
	os.WriteFile(cfgNoAuth, append(b, "serve:\n  no_auth: true\n"...), 0o644)
	cmd = exec.Command(dshBin, "serve", "--config", cfgNoAuth, "--listen", "0.0.0.0:0")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=")
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "loopback") {
		t.Fatalf("%v: %s", err, out)
	}
}

// TestServeUnattendedSources runs the built binary with a webhook and a
// schedule configured: a signed delivery is accepted (a forged one is
// not) and reaches its agent, the schedule prompts its session by
// itself, both recorded as unattended, and the page is served.
func TestServeUnattendedSources(t *testing.T) {
	store, state := t.TempDir(), t.TempDir()
	cfg := writeConfig(t, "        - text: \"noted\"\n", "  - use: session.jsonl\n    config: {dir: "+store+"}\n")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, []byte(`serve:
  no_auth: true
  state_dir: `+state+`
  webhooks:
    ci:
      secret_env: CI_HOOK_SECRET
      session: from-ci
      prompt: "build {{.Body.build}} {{.Body.status}}"
  schedules:
    - name: tick
      cron: "@every 1s"
      session: ticks
      prompt: "tick at {{.Time.Format \"15:04:05\"}}"
`)...), 0o644)
	p := startServe(t, cfg, "CI_HOOK_SECRET=s3cret")

	body := `{"build":42,"status":"green"}`
	post := func(sig string) int {
		req, _ := http.NewRequest("POST", p.base+"/hooks/ci", strings.NewReader(body))
		req.Header.Set("X-Hub-Signature-256", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(body))
	if code := post("sha256=" + hex.EncodeToString(make([]byte, 32))); code != http.StatusUnauthorized {
		t.Fatalf("a forged delivery got %d, want 401", code)
	}
	if code := post("sha256=" + hex.EncodeToString(mac.Sum(nil))); code != http.StatusAccepted {
		t.Fatalf("a signed delivery got %d, want 202:\n%s", code, p.log.String())
	}
	resp, err := http.Get(p.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page), "/assets/") {
		t.Fatalf("GET / = %d %s: %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), page)
	}

	// Both sessions get their prompt, marked unattended, on disk.
	wait := func(file, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			data, _ := os.ReadFile(filepath.Join(store, file))
			if strings.Contains(string(data), want) && strings.Contains(string(data), `"unattended":true`) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never held %q as an unattended prompt:\n%s\nlog:\n%s", file, want, data, p.log.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wait("from-ci.jsonl", "build 42 green")
	wait("ticks.jsonl", "tick at ")

	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.copied
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("dsh serve exited with %v:\n%s", err, p.log.String())
	}
	if strings.Contains(p.log.String(), "s3cret") {
		t.Fatalf("the webhook secret is on stderr:\n%s", p.log.String())
	}
	// The schedule's last run is kept for the next start.
	if _, err := os.Stat(filepath.Join(state, "schedules.json")); err != nil {
		t.Fatalf("no schedule state: %v", err)
	}
}

// A schedule's turn still running at SIGTERM is cancelled at the shutdown
// deadline, as a turn of the API is, and dsh serve exits 0 as documented.
func TestServeShutdownCancelsAnUnattendedTurn(t *testing.T) {
	store, state := t.TempDir(), t.TempDir()
	cfg := writeConfig(t, "        - text: \""+strings.Repeat("slow ", 400)+"\"\n", "  - use: session.jsonl\n    config: {dir: "+store+"}\n")
	b, _ := os.ReadFile(cfg)
	yaml := strings.Replace(string(b), "    config:\n      replies:", "    config:\n      delay: 20ms\n      replies:", 1) + `serve:
  no_auth: true
  state_dir: ` + state + `
  shutdown_timeout: 300ms
  schedules:
    - name: tick
      cron: "@every 1s"
      prompt: "tick"
`
	os.WriteFile(cfg, []byte(yaml), 0o644)
	p := startServe(t, cfg)
	deadline := time.Now().Add(20 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(store, "*.jsonl"))
		running := false
		for _, f := range files {
			data, _ := os.ReadFile(f)
			running = running || strings.Contains(string(data), `"tick"`)
		}
		if running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schedule never ran:\n%s", p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.copied
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("dsh serve exited with %v:\n%s", err, p.log.String())
	}
}
