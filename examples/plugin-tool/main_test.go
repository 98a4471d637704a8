package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/sdk/sdktest"
)

// TestWordCount calls the tool through the protocol, in this process.
func TestWordCount(t *testing.T) {
	h := sdktest.Start(t, newPlugin())
	if d := h.Tool("word_count"); d == nil || !d.GetParallelSafe() {
		t.Fatalf("word_count declared as %v, want a parallel-safe tool", d)
	}
	res, err := h.CallTool(t.Context(), "word_count", map[string]string{"text": "one two\nthree\n"})
	if err != nil || res.GetContent() != "the text: 2 lines, 3 words, 14 bytes" {
		t.Fatalf("got %v, %v", res, err)
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("a b c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = h.CallTool(t.Context(), "word_count", map[string]string{"path": "notes.txt"}, sdktest.InWorkspace(ws))
	if err != nil || res.GetContent() != "notes.txt: 1 lines, 3 words, 6 bytes" {
		t.Fatalf("a file in the workspace: got %v, %v", res, err)
	}
	// A path out of the workspace is a failure the model sees, not an
	// error of the plugin.
	res, err = h.CallTool(t.Context(), "word_count", map[string]string{"path": "../secret"}, sdktest.InWorkspace(ws))
	if err != nil || !res.GetIsError() {
		t.Fatalf("a path outside the workspace: got %v, %v; want an error result", res, err)
	}
}

// TestBinary builds the plugin and calls its tool in a child process,
// started as dsh starts it.
func TestBinary(t *testing.T) {
	h := sdktest.Exec(t, sdktest.Build(t, "."), nil)
	res, err := h.CallTool(t.Context(), "word_count", map[string]string{"text": "a b"})
	if err != nil || res.GetContent() != "the text: 0 lines, 2 words, 3 bytes" {
		t.Fatalf("got %v, %v", res, err)
	}
}
