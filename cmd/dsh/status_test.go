package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// terminalLog is the bytes a screen sent to its terminal and the echo
// switches it made.
type terminalLog struct {
	mu    sync.Mutex
	bytes bytes.Buffer
	echo  []bool
}

func (l *terminalLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes.Write(p)
}

// take returns what was sent since the last take.
func (l *terminalLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.bytes.String()
	l.bytes.Reset()
	return s
}

func newTestScreen(t *testing.T, width int) (*termScreen, *terminalLog) {
	log := &terminalLog{}
	scr := newTermScreen(log, func() int { return width }, func(on bool) {
		log.mu.Lock()
		log.echo = append(log.echo, on)
		log.mu.Unlock()
	})
	t.Cleanup(scr.close)
	return scr, log
}

func TestStatusLineIsErasedBeforeEachWriteAndDrawnAfter(t *testing.T) {
	scr, log := newTestScreen(t, 80)
	w := scr.writer(log)
	scr.show(func(frame string) string { return "STATUS" })
	if got := log.take(); !strings.Contains(got, "STATUS") {
		t.Fatalf("show drew %q", got)
	}
	io.WriteString(w, "hello\n")
	got := log.take()
	if !strings.HasPrefix(got, "\r\x1b[Jhello\n") || !strings.HasSuffix(got, "STATUS\x1b[0m") {
		t.Fatalf("a write sent %q; want the status erased, the text, the status again", got)
	}
	// A prompt keeps the cursor on its line: no status under it.
	io.WriteString(w, "answer y or n > ")
	if got := log.take(); strings.Contains(got, "STATUS") || !strings.HasSuffix(got, "> ") {
		t.Fatalf("the status was drawn after a prompt: %q", got)
	}
	io.WriteString(w, "(allowed once)\n")
	if got := log.take(); !strings.HasSuffix(got, "STATUS\x1b[0m") {
		t.Fatalf("the status did not come back after the answer: %q", got)
	}
	scr.show(nil)
	if got := log.take(); got != "\r\x1b[J" {
		t.Fatalf("removing the status sent %q, want only its erasure", got)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if fmt.Sprint(log.echo) != "[false true false true]" {
		t.Fatalf("echo switched %v; want off with the status, on at the prompt, off, on", log.echo)
	}
}

func TestPreviewIsBoundedAndErasedWhole(t *testing.T) {
	scr, log := newTestScreen(t, 20)
	w := scr.writer(log)
	var text strings.Builder
	for i := range 30 {
		fmt.Fprintf(&text, "row %d\n", i)
	}
	text.WriteString(strings.Repeat("long ", 20)) // wraps over several rows
	scr.setPreview(text.String())
	scr.show(func(string) string { return "STATUS " + strings.Repeat("x", 40) })
	drawn := log.take()
	rows := strings.Split(drawn, "\r\n")
	if len(rows) != previewRows+1 {
		t.Fatalf("the region has %d rows, want %d: %q", len(rows), previewRows+1, drawn)
	}
	for _, r := range rows {
		if n := csiLen(r); n > 19 {
			t.Fatalf("a row of %d columns on a terminal of 20: %q", n, r)
		}
	}
	io.WriteString(w, "x\n")
	if got := log.take(); !strings.HasPrefix(got, fmt.Sprintf("\x1b[%dA\r\x1b[J", previewRows)) {
		t.Fatalf("the next write does not erase the %d rows first: %q", previewRows+1, got)
	}
}
