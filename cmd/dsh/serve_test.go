package main

import (
	"bufio"
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

	cmd := exec.Command(dshBin, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=", "DSH_SERVE_TOKEN="+token)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var log syncBuffer
	addr := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.add(sc.Text())
			if rest, ok := strings.CutPrefix(sc.Text(), "dsh serve: listening on http://"); ok {
				addr <- strings.Fields(rest)[0]
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("no listening line:\n%s", log.String())
	}

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
	go func() { <-copied; done <- cmd.Wait() }()
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
