package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

var pngHead = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func TestAttachTakesAnyReadableFileAndPicksItsKind(t *testing.T) {
	outside := t.TempDir() // --attach is the person's explicit choice: no workspace rule
	shot, notes := filepath.Join(outside, "shot.png"), filepath.Join(outside, "notes.md")
	os.WriteFile(shot, pngHead, 0o600)
	os.WriteFile(notes, []byte("# notes\n"), 0o600)
	parts, err := attachFiles([]string{shot, notes}, attachments.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 || parts[0].Type != llm.PartImage || parts[0].MediaType != "image/png" || parts[0].Name != "shot.png" ||
		parts[1].Type != llm.PartFile || parts[1].Name != "notes.md" || string(parts[1].Data) != "# notes\n" {
		t.Fatalf("parts %+v", parts)
	}
}

func TestAttachRefusesDirectoriesMissingAndOversizedFiles(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	os.WriteFile(big, make([]byte, 101), 0o600)
	if _, err := attachFiles([]string{big}, attachments.Limits{PerPart: 100}); !errs.HasCode(err, attachments.TooLarge) {
		t.Errorf("an oversized file: %v", err)
	}
	if _, err := attachFiles([]string{dir}, attachments.Limits{}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Errorf("a directory: %v", err)
	}
	if _, err := attachFiles([]string{filepath.Join(dir, "nope")}, attachments.Limits{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestMentionPathsFindsAtWordsOnly(t *testing.T) {
	got := mentionPaths("look at @img/a.png, and @notes.md. mail me@x.org (@b.txt) @")
	if want := []string{"img/a.png", "notes.md"}; !slices.Equal(got, want) {
		// "(@b.txt)" starts with "(" so it is prose, like me@x.org.
		t.Fatalf("got %q; want %q", got, want)
	}
}

// @mentions follow the file tools' confinement: inside the workspace
// only, symlinks out refused; a mention of nothing is prose.
func TestMentionsAreConfinedToTheWorkspace(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.png"), pngHead, 0o600)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s3cret"), 0o600)
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "link.txt"))

	parts, err := mentions(ws, "what is @a.png about, @nobody?", attachments.Limits{})
	if err != nil || len(parts) != 1 || parts[0].Type != llm.PartImage || parts[0].Name != "a.png" {
		t.Fatalf("parts %+v, %v", parts, err)
	}
	for _, line := range []string{"read @../" + filepath.Base(outside) + "/secret.txt", "read @" + filepath.Join(outside, "secret.txt"), "read @link.txt"} {
		if parts, err := mentions(ws, line, attachments.Limits{}); err == nil {
			t.Errorf("%q attached %+v; want a refusal", line, parts)
		}
	}
}
