package acp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// A client that offers fs/read_text_file and fs/write_text_file gets the
// file tools' reads and writes: the model reads the unsaved buffer, and
// its edit lands in the editor, not behind it on disk.
func TestTheFileToolsGoThroughTheEditor(t *testing.T) {
	e := newEnv(t, envOpts{presets: []string{"workspace-write"}, replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "read", Arguments: `{"path":"a.txt"}`}}},
		{ToolCalls: []scripted.Call{{Name: "edit", Arguments: `{"path":"a.txt","old":"unsaved","new":"edited"}`}}},
		{Text: "done"},
	}})
	path := filepath.Join(e.dir, "a.txt")
	if err := os.WriteFile(path, []byte("saved text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.c.buffers = map[string]string{path: "unsaved text\n"}
	if _, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}}}); err != nil {
		t.Fatal(err)
	}
	s, err := e.conn.NewSession(e.ctx(), newSessionReq(e.dir))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := e.prompt(s.SessionId, "fix a.txt"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r, err)
	}
	// Both steps' calls are call_1; the read's result is the first
	// update that carries content.
	var read string
	for _, n := range e.c.all() {
		if u := n.Update.ToolCallUpdate; u != nil && u.ToolCallId == "call_1" && read == "" {
			for _, c := range u.Content {
				if c.Content != nil && c.Content.Content.Text != nil {
					read += c.Content.Content.Text.Text
				}
			}
		}
	}
	if !strings.Contains(read, "unsaved text") {
		t.Fatalf("read did not show the editor's buffer: %q", read)
	}
	e.c.mu.Lock()
	got := e.c.buffers[path]
	e.c.mu.Unlock()
	if got != "edited text\n" {
		t.Fatalf("the editor holds %q after the edit", got)
	}
	if disk, _ := os.ReadFile(path); string(disk) != "saved text\n" {
		t.Fatalf("the edit went to the disk: %q", disk)
	}
}

// A client may send initialize again while a session opens (the SDK
// serves requests concurrently); under -race this catches an unguarded
// read of the client's capabilities.
func TestInitializeWhileASessionOpens(t *testing.T) {
	e := newEnv(t, envOpts{})
	if _, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range 20 {
			if _, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
				ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true}}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 5 {
		if _, err := e.conn.NewSession(e.ctx(), newSessionReq(e.dir)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
