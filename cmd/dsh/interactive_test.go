package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// screen collects what the program writes to its terminal.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startInteractive runs dsh run --config cfg on a terminal in plain mode
// (NO_COLOR) and waits for its first prompt; pos is where the screen
// stands then.
func startInteractive(t *testing.T, cfg string) (tty *os.File, cmd *exec.Cmd, scr *screen, pos int) {
	t.Helper()
	return startInteractiveIn(t, cfg, "NO_COLOR=1")
}

// startInteractiveIn is startInteractive with env added to dsh's
// environment: "NO_COLOR=" and a TERM for rich mode.
func startInteractiveIn(t *testing.T, cfg string, env ...string) (tty *os.File, cmd *exec.Cmd, scr *screen, pos int) {
	t.Helper()
	cmd = exec.Command(dshBin, "run", "--config", cfg)
	cmd.Env = append(os.Environ(), env...)
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	scr = &screen{}
	go io.Copy(scr, tty)
	return tty, cmd, scr, scr.waitFor(t, 0, "> ")
}

// leaveWithCtrlD types Ctrl-D and expects dsh to exit 0 soon after.
func leaveWithCtrlD(t *testing.T, tty *os.File, cmd *exec.Cmd, scr *screen) {
	t.Helper()
	io.WriteString(tty, "\x04")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, scr.String())
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("did not exit on Ctrl-D:\n%s", scr.String())
	}
}

// csi matches the terminal's control sequences: colours, erasing.
var csi = regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]")

// text is what the screen shows without its control sequences: the same
// words whether dsh runs in rich mode or plain.
func (s *screen) text() string { return csi.ReplaceAllString(s.String(), "") }

// waitFor waits until the screen's text (text) shows want after position
// from, and returns the position after it.
func (s *screen) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		text := s.text()
		if i := strings.Index(text[min(from, len(text)):], want); i >= 0 {
			return from + i + len(want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the screen never showed %q; it shows:\n%s", want, s.String())
	return 0
}

// TestInteractiveSession holds in plain mode and in rich mode alike.
func TestInteractiveSession(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testInteractiveSession(t, "NO_COLOR=1") })
	t.Run("rich", func(t *testing.T) { testInteractiveSession(t, "NO_COLOR=", "TERM=xterm-256color") })
}

func testInteractiveSession(t *testing.T, env ...string) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	// No replies: the scripted model echoes the last user message, one
	// word every 60ms, slow enough to type while it answers.
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.scripted
    config: {delay: 60ms}
agents:
  - id: main
    provider: scripted
log:
  level: warn
`), 0o644)
	tty, cmd, scr, pos := startInteractiveIn(t, cfg, env...)

	io.WriteString(tty, "hello there\r")
	pos = scr.waitFor(t, pos, "You said: hello there")
	pos = scr.waitFor(t, pos, "> ")

	// Typed while busy: queued, then answered in its own turn.
	io.WriteString(tty, "first message\r")
	pos = scr.waitFor(t, pos, "You ")
	io.WriteString(tty, "second message\r")
	pos = scr.waitFor(t, pos, "(queued)")
	pos = scr.waitFor(t, pos, "You said: second message")
	pos = scr.waitFor(t, pos, "> ")

	// /steer joins the running turn: the next step answers it.
	io.WriteString(tty, "steer me\r")
	pos = scr.waitFor(t, pos, "You ")
	io.WriteString(tty, "/steer go left\r")
	pos = scr.waitFor(t, pos, "(steering)")
	pos = scr.waitFor(t, pos, "You said: go left")
	pos = scr.waitFor(t, pos, "> ")

	// Ctrl-C cancels the running turn and keeps the session.
	io.WriteString(tty, "a long answer please\r")
	pos = scr.waitFor(t, pos, "You ")
	io.WriteString(tty, "\x03")
	pos = scr.waitFor(t, pos, "(turn cancelled")
	io.WriteString(tty, "/agents\r")
	scr.waitFor(t, pos, "main  idle")

	// Ctrl-D leaves cleanly.
	leaveWithCtrlD(t, tty, cmd, scr)
}

// TestInteractiveSessionSaysItResumed: opening a session that was persisted
// says so before the first prompt.
func TestInteractiveSessionSaysItResumed(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.scripted
  - use: session.jsonl
    config: {dir: `+filepath.Join(dir, "sessions")+`}
agents:
  - id: main
    provider: scripted
    session: main
log:
  level: warn
`), 0o644)
	if o := runDsh(t, "", "run", "--config", cfg, "-p", "remember me"); o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	cmd := exec.Command(dshBin, "run", "--config", cfg)
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	scr := &screen{}
	go io.Copy(scr, tty)
	scr.waitFor(t, 0, "Session main resumed with 2 messages.")
	io.WriteString(tty, "\x04")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, scr.String())
	}
}

// TestPastedLinesReachTheAgentInOrder: lines pasted while the agent works
// enter its session in the order they were typed.
func TestPastedLinesReachTheAgentInOrder(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.scripted
    config: {delay: 20ms}
  - use: session.jsonl
    config: {dir: `+filepath.Join(dir, "sessions")+`}
agents:
  - id: main
    provider: scripted
    session: main
log:
  level: warn
`), 0o644)
	tty, cmd, scr, pos := startInteractive(t, cfg)
	io.WriteString(tty, "warm up the agent please\r")
	pos = scr.waitFor(t, pos, "You ")
	var want []string
	var paste strings.Builder
	for i := 1; i <= 30; i++ {
		line := fmt.Sprintf("line%02d", i)
		want = append(want, line)
		paste.WriteString(line + "\r")
	}
	io.WriteString(tty, paste.String())
	scr.waitFor(t, pos, "You said: line30")
	io.WriteString(tty, "/quit\r")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, scr.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "sessions", "main.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e struct {
			Type    string `json:"type"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		}
		json.Unmarshal([]byte(line), &e)
		if e.Type == "user/message" && strings.HasPrefix(e.Message.Content, "line") {
			got = append(got, e.Message.Content)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the session took the lines in the order\n%v", got)
	}
}

// TestInteractiveSessionFollowsAReload: after --watch recreates the agent,
// the session talks to the new one.
func TestInteractiveSessionFollowsAReload(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	base := `plugins:
  - id: a
    use: llm.scripted
    config: {name: a, replies: [{text: answered by a}]}
  - id: b
    use: llm.scripted
    config: {name: b, replies: [{text: answered by b}]}
agents:
  - id: main
    provider: a
log:
  level: warn
`
	os.WriteFile(cfg, []byte(base), 0o644)
	cmd := exec.Command(dshBin, "run", "--watch", "--config", cfg)
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	scr := &screen{}
	go io.Copy(scr, tty)
	pos := scr.waitFor(t, 0, "> ")
	io.WriteString(tty, "hello\r")
	pos = scr.waitFor(t, pos, "answered by a")
	pos = scr.waitFor(t, pos, "> ")

	os.WriteFile(cfg, []byte(strings.Replace(base, "provider: a", "provider: b", 1)), 0o644)
	pos = scr.waitFor(t, pos, "(config reloaded; agent main restarted")
	io.WriteString(tty, "hello again\r")
	scr.waitFor(t, pos, "answered by b")
	io.WriteString(tty, "\x04")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, scr.String())
	}
}
