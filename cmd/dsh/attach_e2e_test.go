package main

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pngBytes is a small real PNG.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// echoConfig is a config whose scripted model echoes each prompt with what
// each attachment brought, persisting sessions in store, working in ws.
func echoConfig(t *testing.T, store, ws string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	cfg := "plugins:\n  - use: llm.scripted\n  - use: session.jsonl\n    config: {dir: " + store + "}\n" +
		"agents:\n  - id: main\n    provider: scripted\n    workspace: " + ws + "\nlog:\n  level: warn\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// blobs lists the attachments stored under store.
func blobs(t *testing.T, store string) []string {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(store, "attachments", "blobs"))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestRunAttachReachesTheModelByReference runs the binary: --attach
// sends an image to the model with its bytes, the session log names it by
// reference only, and dsh sessions rm releases it.
func TestRunAttachReachesTheModelByReference(t *testing.T) {
	store, ws := t.TempDir(), t.TempDir()
	cfg := echoConfig(t, store, ws)
	img := pngBytes(t)
	pic := filepath.Join(t.TempDir(), "pic.png")
	os.WriteFile(pic, img, 0o644)

	o := runDsh(t, "", "run", "--config", cfg, "--session", "shot", "--attach", pic, "-p", "what is this")
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	if want := "[image image/png, " + strconv.Itoa(len(img)) + " bytes]"; !strings.Contains(o.stdout, want) {
		t.Fatalf("the model did not get the image's bytes: stdout %q, want %q", o.stdout, want)
	}
	log, err := os.ReadFile(filepath.Join(store, "shot.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"ref":"sha256:`) || strings.Contains(string(log), base64.StdEncoding.EncodeToString(img)[:40]) {
		t.Fatalf("the log should hold a reference, not the bytes:\n%s", log)
	}
	if got := blobs(t, store); len(got) != 1 {
		t.Fatalf("stored blobs: %v, want one", got)
	}
	if o := runDsh(t, "", "sessions", "rm", "--config", cfg, "shot"); o.code != 0 {
		t.Fatalf("sessions rm: exit %d: %s", o.code, o.stderr)
	}
	if got := blobs(t, store); len(got) != 0 {
		t.Fatalf("sessions rm left the session's attachments: %v", got)
	}
}

// A bad --attach is a usage error before anything starts.
func TestRunAttachRefusesWhatItCannotRead(t *testing.T) {
	store, ws := t.TempDir(), t.TempDir()
	cfg := echoConfig(t, store, ws)
	o := runDsh(t, "", "run", "--config", cfg, "--attach", filepath.Join(ws, "missing.png"), "-p", "hi")
	if o.code != exitUsage || !strings.Contains(o.stderr, "--attach") || !strings.Contains(o.stderr, "missing.png") {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	if o := runDsh(t, "", "run", "--config", cfg, "--attach", ws, "-p", "hi"); o.code != exitUsage || !strings.Contains(o.stderr, "not a regular file") {
		t.Fatalf("a directory: exit %d: %s", o.code, o.stderr)
	}
}

// An @path mention in an interactive line attaches the workspace file;
// one outside the workspace keeps the line from being sent.
func TestInteractiveMentionAttachesAWorkspaceFile(t *testing.T) {
	store, ws := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("buy bread\n"), 0o644)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("no"), 0o644)
	tty, cmd, scr, pos := startInteractive(t, echoConfig(t, store, ws))
	io.WriteString(tty, "read @notes.txt please\r")
	pos = scr.waitFor(t, pos, "[file text/plain, 10 bytes]")
	io.WriteString(tty, "and @../"+filepath.Base(filepath.Dir(outside))+"/secret.txt\r")
	pos = scr.waitFor(t, pos, "not sent")
	leaveWithCtrlD(t, tty, cmd, scr)
	if strings.Contains(scr.String()[pos:], "[file") {
		t.Fatalf("a file outside the workspace reached the model:\n%s", scr.String())
	}
}
