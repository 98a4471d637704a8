package bash

import (
	"strings"
	"testing"
)

func captureOf(max int, chunks ...string) string {
	c := newCapture(max)
	for _, s := range chunks {
		c.Write([]byte(s))
	}
	return c.String()
}

func TestCaptureKeepsWhatFitsWhole(t *testing.T) {
	if got := captureOf(10, "01234", "56789"); got != "0123456789" {
		t.Fatalf("got %q", got)
	}
}

func TestCaptureKeepsHeadAndTailAcrossManyWrites(t *testing.T) {
	var chunks []string
	for i := 0; i < 1000; i++ {
		chunks = append(chunks, "abcdefghij")
	}
	got := captureOf(20, chunks...)
	want := "abcdefghij\n[... 9980 bytes of output cut here: the first 10 and the last 10 bytes are shown ...]\nabcdefghij"
	if got != want {
		t.Fatalf("got %q", got)
	}
}

// TestCaptureNeverSplitsACharacter: "é" is two bytes; a cut inside one
// moves to its edge and counts the byte (58 bytes, 2 + 2 kept).
func TestCaptureNeverSplitsACharacter(t *testing.T) {
	got := captureOf(6, "aaé", strings.Repeat("-", 50), "éxx")
	if !strings.HasPrefix(got, "aa\n[... 54 bytes") || !strings.HasSuffix(got, "\nxx") {
		t.Fatalf("got %q", got)
	}
	if !strings.Contains(got, "the first 2 and the last 2 bytes") {
		t.Fatalf("got %q", got)
	}
}
