package main

import (
	stdctx "context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
)

// acpProcess is a `dsh acp` with an editor connected to it.
type acpProcess struct {
	cmd    *exec.Cmd
	conn   *acp.ClientSideConnection
	ed     *editor
	stderr *strings.Builder
}

func startACP(t *testing.T, cfg string) *acpProcess {
	t.Helper()
	cmd := exec.Command(dshBin, "acp", "--config", cfg)
	cmd.Env = append(cmd.Environ(), "DSH_CONFIG=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	p := &acpProcess{cmd: cmd, ed: &editor{}, stderr: &strings.Builder{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	p.conn = acp.NewClientSideConnection(p.ed, stdin, stdout)
	return p
}

// chunks counts the agent message chunks the editor received.
func (e *editor) chunks() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, u := range e.updates {
		if u.AgentMessageChunk != nil {
			n++
		}
	}
	return n
}

// TestAnACPPromptKilledMidAnswerIsClosedOnLoad kills `dsh acp` while its
// prompt's answer streams. A new `dsh acp` loads the session: the load
// answers, the killed turn is closed as interrupted with its prompt kept
// once, and the next prompt runs in the same session. (ACP's request ids
// are scoped to one connection: an editor that sends the killed prompt
// again after the restart sends a new prompt, which runs.)
func TestAnACPPromptKilledMidAnswerIsClosedOnLoad(t *testing.T) {
	store := t.TempDir()
	cfg := crashServeConfig(t, store, t.TempDir(), "")
	p := startACP(t, cfg)
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	if _, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err, p.stderr.String())
	}
	ws := t.TempDir()
	s, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: ws, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err, p.stderr.String())
	}
	go p.conn.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("count slowly")}})
	for p.ed.chunks() < 3 {
		if ctx.Err() != nil {
			t.Fatalf("no answer streamed: %s", p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd.Wait()

	q := startACP(t, cfg)
	if _, err := q.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err, q.stderr.String())
	}
	if _, err := q.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: s.SessionId, Cwd: ws, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load after the kill: %v\n%s", err, q.stderr.String())
	}
	q.ed.mu.Lock()
	replayed := 0
	for _, u := range q.ed.updates {
		if u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil && u.UserMessageChunk.Content.Text.Text == "count slowly" {
			replayed++
		}
	}
	q.ed.mu.Unlock()
	if replayed != 1 {
		t.Fatalf("the load replayed the killed prompt %d times", replayed)
	}
	pctx, pcancel := stdctx.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	go func() {
		// The answer is slow: cancel once the turn is under way.
		for q.ed.chunks() == 0 && pctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		q.conn.Cancel(pctx, acp.CancelNotification{SessionId: s.SessionId})
	}()
	r, err := q.conn.Prompt(pctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("next")}})
	if err != nil || r.StopReason != acp.StopReasonCancelled {
		t.Fatalf("the next prompt: %+v %v\n%s", r, err, q.stderr.String())
	}
	lines := crashLog(t, filepath.Join(store, string(s.SessionId)+".jsonl"))
	n := crashPrompts(lines)
	if n["count slowly"] != 1 || n["next"] != 1 {
		t.Fatalf("prompts in the log: %v", n)
	}
	var ends []string
	for _, l := range lines {
		if l.Type == "turn/end" {
			ends = append(ends, l.Reason)
		}
	}
	if len(ends) != 2 || ends[0] != "interrupted" {
		t.Fatalf("turn ends: %v", ends)
	}
}
