package files

import (
	stdctx "context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/services/editor"
)

// buffers is an editor holding unsaved text for some files; reads of
// other files fail, as an editor's do for a file it cannot open, and
// writes land in the buffers. noWrites makes it an editor that only
// reads.
type buffers struct {
	mu       sync.Mutex
	text     map[string]string
	reads    []string
	noWrites bool
}

func (b *buffers) ReadTextFile(_ stdctx.Context, path string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads = append(b.reads, path)
	t, ok := b.text[path]
	if !ok {
		return "", errors.New("not open in the editor")
	}
	return t, nil
}

func (b *buffers) WriteTextFile(_ stdctx.Context, path, text string) error {
	if b.noWrites {
		return editor.ErrNotOffered
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.text[path] = text
	return nil
}

func TestTheToolsReadAndWriteWhatTheEditorHolds(t *testing.T) {
	ws := tree(t, map[string]string{"a.txt": "on disk\n", "b.txt": "only on disk\n"})
	ed := &buffers{text: map[string]string{filepath.Join(ws, "a.txt"): "unsaved line\nsecond\n"}}
	ctx := editor.With(stdctx.Background(), ed)
	cfg := Config{}

	if r := runIn(t, ctx, cfg, "read", ws, m{"path": "a.txt"}); r.IsError || !strings.Contains(r.Content, "unsaved line") || strings.Contains(r.Content, "on disk") {
		t.Fatalf("read did not show the editor's text: %+v", r)
	}
	// A file the editor cannot give is read from the disk.
	if r := runIn(t, ctx, cfg, "read", ws, m{"path": "b.txt"}); r.IsError || !strings.Contains(r.Content, "only on disk") {
		t.Fatalf("fallback to disk: %+v", r)
	}

	r := runIn(t, ctx, cfg, "edit", ws, m{"path": "a.txt", "old": "second", "new": "2nd"})
	if r.IsError || !strings.Contains(r.Content, "-second") || !strings.Contains(r.Content, "+2nd") {
		t.Fatalf("edit: %+v", r)
	}
	if got := ed.text[filepath.Join(ws, "a.txt")]; got != "unsaved line\n2nd\n" {
		t.Fatalf("the editor holds %q", got)
	}
	if got := readFile(t, filepath.Join(ws, "a.txt")); got != "on disk\n" {
		t.Fatalf("edit wrote the disk behind the editor: %q", got)
	}

	r = runIn(t, ctx, cfg, "write", ws, m{"path": "new/c.txt", "content": "fresh"})
	if r.IsError || !strings.HasPrefix(r.Content, "created") || ed.text[filepath.Join(ws, "new", "c.txt")] != "fresh" {
		t.Fatalf("write: %+v %v", r, ed.text)
	}
	if _, err := os.Stat(filepath.Join(ws, "new", "c.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("write went to the disk too: %v", err)
	}
}

// The workspace's rules hold before the editor is asked: an escape never
// reaches it, and a hard-linked file is not written through it.
func TestTheEditorGetsOnlyConfinedPaths(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := tree(t, map[string]string{"x.txt": "x\n"})
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(outside, "secret"), filepath.Join(ws, "hard")); err != nil {
		t.Fatal(err)
	}
	ed := &buffers{text: map[string]string{}}
	ctx := editor.With(stdctx.Background(), ed)
	for _, p := range []string{"../" + filepath.Base(outside) + "/secret", filepath.Join(outside, "secret"), "link"} {
		if r := runIn(t, ctx, Config{}, "read", ws, m{"path": p}); !r.IsError {
			t.Fatalf("read %q: %+v", p, r)
		}
	}
	if r := runIn(t, ctx, Config{}, "write", ws, m{"path": "hard", "content": "overwritten"}); !r.IsError || !strings.Contains(r.Content, "hard link") {
		t.Fatalf("write through a hard link: %+v", r)
	}
	for _, p := range ed.reads {
		if !strings.HasPrefix(p, ws+string(filepath.Separator)) || strings.HasSuffix(p, "link") {
			t.Fatalf("the editor was asked for %q", p)
		}
	}
	if len(ed.text) != 0 {
		t.Fatalf("the editor was written: %v", ed.text)
	}
}

// An editor that does not write files leaves the writes to the disk.
func TestAnEditorWithoutWritesLeavesThemToTheDisk(t *testing.T) {
	ws := tree(t, map[string]string{"a.txt": "old\n"})
	ctx := editor.With(stdctx.Background(), &buffers{text: map[string]string{}, noWrites: true})
	if r := runIn(t, ctx, Config{}, "edit", ws, m{"path": "a.txt", "old": "old", "new": "new"}); r.IsError {
		t.Fatal(r)
	}
	if got := readFile(t, filepath.Join(ws, "a.txt")); got != "new\n" {
		t.Fatalf("disk holds %q", got)
	}
}
