package main

import (
	"bufio"
	stdctx "context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
)

// editor is the client side of the end-to-end test: it records updates
// and allows every permission request once.
type editor struct {
	mu      sync.Mutex
	updates []acp.SessionUpdate
}

func (e *editor) SessionUpdate(_ stdctx.Context, n acp.SessionNotification) error {
	e.mu.Lock()
	e.updates = append(e.updates, n.Update)
	e.mu.Unlock()
	return nil
}
func (e *editor) RequestPermission(stdctx.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected("allow-once")}, nil
}
func (e *editor) ReadTextFile(stdctx.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errors.New("no")
}
func (e *editor) WriteTextFile(stdctx.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errors.New("no")
}
func (e *editor) CreateTerminal(stdctx.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errors.New("no")
}
func (e *editor) KillTerminal(stdctx.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errors.New("no")
}
func (e *editor) TerminalOutput(stdctx.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errors.New("no")
}
func (e *editor) ReleaseTerminal(stdctx.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errors.New("no")
}
func (e *editor) WaitForTerminalExit(stdctx.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errors.New("no")
}

// TestACPEndToEnd drives the built binary as an editor would: initialize,
// a session in a directory, a prompt whose answer streams, then stdin
// closed: exit 0 with the session saved. stdout carries only JSON-RPC.
func TestACPEndToEnd(t *testing.T) {
	store := t.TempDir()
	cfg := writeConfig(t, "        - text: \"hello from dsh\"\n", "  - use: session.jsonl\n    config: {dir: "+store+"}\n")
	cmd := exec.Command(dshBin, "acp", "--config", cfg, "--log-level", "debug")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Every line on stdout must be a JSON-RPC message: tee it to check.
	pr, pw := io.Pipe()
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
			pw.Write(append(sc.Bytes(), '\n'))
		}
		close(lines)
		pw.Close()
	}()
	ed := &editor{}
	conn := acp.NewClientSideConnection(ed, stdin, pr)
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Second)
	defer cancel()
	init, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: 1})
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	// The scripted model takes images: the editor is told it may send them.
	if !init.AgentCapabilities.PromptCapabilities.Image {
		t.Fatalf("initialize does not offer images for a provider that takes them: %+v", init.AgentCapabilities.PromptCapabilities)
	}
	dir := t.TempDir()
	s, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	r, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r, err, stderr.String())
	}
	var text strings.Builder
	ed.mu.Lock()
	for _, u := range ed.updates {
		if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
			text.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
	}
	ed.mu.Unlock()
	if text.String() != "hello from dsh" {
		t.Fatalf("streamed %q", text.String())
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\nstderr: %s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("dsh acp did not exit after stdin closed")
	}
	for l := range lines {
		if !strings.HasPrefix(l, `{"jsonrpc":"2.0"`) {
			t.Fatalf("stdout carried a non-protocol line: %q", l)
		}
	}
	// The logs went to stderr.
	if !strings.Contains(stderr.String(), "agent opened") {
		t.Fatalf("no host log on stderr: %s", stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(store, string(s.SessionId)+".jsonl"))
	if err != nil || !strings.Contains(string(data), `"turn/end"`) {
		t.Fatalf("session not saved: %v", err)
	}
}

// A bad acp: key is a usage error naming the key, before anything starts.
func TestACPBadConfig(t *testing.T) {
	for _, c := range []struct{ extra, want string }{
		{"acp:\n  mode: yolo\n", "acp.mode"},
		{"acp:\n  presets: [nope]\n", "acp.presets[0]"},
		{"acp:\n  agent: ghost\n", "acp.agent"},
	} {
		cfg := writeConfig(t, "        - text: hi\n", "")
		f, _ := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(c.extra)
		f.Close()
		cmd := exec.Command(dshBin, "acp", "--config", cfg)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
			t.Fatalf("%s: %v\nstdout %q\nstderr %q", c.extra, err, stdout.String(), stderr.String())
		}
	}
}
