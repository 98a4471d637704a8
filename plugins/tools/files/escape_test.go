package files

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/tools"
)

const (
	ruleSymlink  = "PATH_OUTSIDE_WORKSPACE (workspace/symlink)"
	ruleDotDot   = "PATH_OUTSIDE_WORKSPACE (workspace/dotdot)"
	ruleAbsolute = "PATH_OUTSIDE_WORKSPACE (workspace/absolute)"
)

// escapes builds a workspace next to a secret folder outside it, with the
// ways out a model might try: a symlink to /etc, a folder symlink to the
// secret folder, a file symlink to the secret file and a dangling symlink
// whose target outside does not exist yet.
func escapes(t *testing.T) (ws, outside string) {
	t.Helper()
	ws = tree(t, map[string]string{"inside.txt": "inside\n", "sub/": ""})
	outside = tree(t, map[string]string{"secret.txt": "TOPSECRET\n"})
	for link, target := range map[string]string{
		"etc":          "/etc",
		"out":          outside,
		"sub/up":       "../..",
		"secret.txt":   filepath.Join(outside, "secret.txt"),
		"dangling.txt": filepath.Join(outside, "new.txt"),
		"rel-out":      filepath.Join("..", filepath.Base(outside)),
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	return ws, outside
}

func TestEscapesAreRefusedByEveryTool(t *testing.T) {
	ws, outside := escapes(t)
	cfg := Config{}
	cases := []struct {
		name string
		tool string
		args m
		rule string
	}{
		{"symlink to /etc", "read", m{"path": "etc/passwd"}, ruleSymlink},
		{"folder symlink", "read", m{"path": "out/secret.txt"}, ruleSymlink},
		{"relative folder symlink", "read", m{"path": "rel-out/secret.txt"}, ruleSymlink},
		{"symlink climbing out", "read", m{"path": "sub/up/etc/hostname"}, ruleSymlink},
		{"file symlink", "read", m{"path": "secret.txt"}, ruleSymlink},
		{"dotdot", "read", m{"path": "a/../../x"}, ruleDotDot},
		{"dotdot to a real file", "read", m{"path": "../" + filepath.Base(outside) + "/secret.txt"}, ruleDotDot},
		{"absolute outside", "read", m{"path": filepath.Join(outside, "secret.txt")}, ruleAbsolute},
		{"absolute /etc", "read", m{"path": "/etc/passwd"}, ruleAbsolute},
		{"write through a folder symlink", "write", m{"path": "out/new.txt", "content": "x"}, ruleSymlink},
		{"write making folders through a symlink", "write", m{"path": "out/deep/new.txt", "content": "x"}, ruleSymlink},
		{"write through a dangling symlink", "write", m{"path": "dangling.txt", "content": "x"}, ruleSymlink},
		{"write replacing a file outside", "write", m{"path": "secret.txt", "content": "x"}, ruleSymlink},
		{"write dotdot", "write", m{"path": "../escape.txt", "content": "x"}, ruleDotDot},
		{"write absolute", "write", m{"path": filepath.Join(outside, "abs.txt"), "content": "x"}, ruleAbsolute},
		{"edit through a file symlink", "edit", m{"path": "secret.txt", "old": "TOP", "new": "NO"}, ruleSymlink},
		{"edit dotdot", "edit", m{"path": "sub/../../x", "old": "a", "new": "b"}, ruleDotDot},
		{"list /etc symlink", "list", m{"path": "etc"}, ruleSymlink},
		{"list dotdot", "list", m{"path": ".."}, ruleDotDot},
		{"list absolute", "list", m{"path": "/"}, ruleAbsolute},
		{"glob in a symlinked folder", "glob", m{"pattern": "*", "path": "out"}, ruleSymlink},
		{"glob pattern's fixed part through a symlink", "glob", m{"pattern": "out/*.txt"}, ruleSymlink},
		{"glob dotdot path", "glob", m{"pattern": "*", "path": "../"}, ruleDotDot},
		{"grep a symlinked folder", "grep", m{"pattern": "SECRET", "path": "out"}, ruleSymlink},
		{"grep a file symlink", "grep", m{"pattern": "SECRET", "path": "secret.txt"}, ruleSymlink},
		{"grep absolute", "grep", m{"pattern": "root", "path": "/etc/passwd"}, ruleAbsolute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := refused(t, cfg, c.tool, ws, c.args, c.rule)
			if strings.Contains(msg, "TOPSECRET") {
				t.Fatalf("the refusal leaked the content: %s", msg)
			}
		})
	}
	// Nothing was written or changed outside.
	if got := readFile(t, filepath.Join(outside, "secret.txt")); got != "TOPSECRET\n" {
		t.Fatalf("the secret changed: %q", got)
	}
	for _, p := range []string{"new.txt", "deep", "abs.txt", "../escape.txt"} {
		if _, err := os.Lstat(filepath.Join(outside, p)); err == nil {
			t.Fatalf("%s was created outside the workspace", p)
		}
	}
}

// TestWalksNeverFollowSymlinksOut: a search of the whole tree neither
// enters a symlinked folder nor reads a symlinked file.
func TestWalksNeverFollowSymlinksOut(t *testing.T) {
	ws, _ := escapes(t)
	if out := ok(t, Config{}, "grep", ws, m{"pattern": "TOPSECRET|root:"}); !strings.Contains(out, "no matches") {
		t.Fatalf("grep followed a symlink out: %s", out)
	}
	out := ok(t, Config{}, "glob", ws, m{"pattern": "**/*.txt"})
	if strings.Contains(out, "out/secret") || strings.Contains(out, "passwd") {
		t.Fatalf("glob entered a symlinked folder: %s", out)
	}
}

// TestAbsolutePathsInsideAreFine: an absolute path naming a file in the
// workspace works like the relative one, as does a .. that stays inside.
func TestAbsolutePathsInsideAreFine(t *testing.T) {
	ws := tree(t, map[string]string{"a/b.txt": "hello\n"})
	if out := ok(t, Config{}, "read", ws, m{"path": filepath.Join(ws, "a/b.txt")}); !strings.Contains(out, "hello") {
		t.Fatal(out)
	}
	if out := ok(t, Config{}, "read", ws, m{"path": "a/../a/b.txt"}); !strings.Contains(out, "hello") {
		t.Fatal(out)
	}
	ok(t, Config{}, "write", ws, m{"path": filepath.Join(ws, "c.txt"), "content": "x"})
	if readFile(t, filepath.Join(ws, "c.txt")) != "x" {
		t.Fatal("absolute write inside")
	}
}

// TestSymlinksInsideAreFollowed: a symlink that stays in the workspace is
// an ordinary path.
func TestSymlinksInsideAreFollowed(t *testing.T) {
	ws := tree(t, map[string]string{"real/f.txt": "content\n"})
	if err := os.Symlink("real", filepath.Join(ws, "alias")); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, Config{}, "read", ws, m{"path": "alias/f.txt"}); !strings.Contains(out, "content") {
		t.Fatal(out)
	}
	ok(t, Config{}, "write", ws, m{"path": "alias/g.txt", "content": "g"})
	if readFile(t, filepath.Join(ws, "real/g.txt")) != "g" {
		t.Fatal("write through an inside symlink")
	}
}

// TestEmptyWorkspaceIsTheWorkingDirectory: a call without a workspace
// works in the process's directory.
func TestEmptyWorkspaceIsTheWorkingDirectory(t *testing.T) {
	ws := tree(t, map[string]string{"here.txt": "here\n"})
	t.Chdir(ws)
	if out := ok(t, Config{}, "read", "", m{"path": "here.txt"}); !strings.Contains(out, "here") {
		t.Fatal(out)
	}
	refused(t, Config{}, "read", "relative/ws", m{"path": "x"}, "WORKSPACE_INVALID")
}

// TestPipesAreRefusedBeforeOpening: opening a named pipe would block the
// call until a writer came, so every tool refuses one before opening it.
func TestPipesAreRefusedBeforeOpening(t *testing.T) {
	ws := tree(t, nil)
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, Config{}, "read", ws, m{"path": "pipe"}, "not a regular file")
	refused(t, Config{}, "write", ws, m{"path": "pipe", "content": "x"}, "not a regular file")
	refused(t, Config{}, "edit", ws, m{"path": "pipe", "old": "a", "new": "b"}, "not a regular file")
	refused(t, Config{}, "list", ws, m{"path": "pipe"}, "not a regular file")
	refused(t, Config{}, "grep", ws, m{"pattern": "x", "path": "pipe"}, "not a regular file")
	if got := ok(t, Config{}, "grep", ws, m{"pattern": "x"}); !strings.Contains(got, "no matches") {
		t.Fatalf("a walk passes pipes by: %s", got)
	}
}

// TestAPipeSwappedInAfterTheCheckDoesNotHang: a file checked (or listed by
// a walk) can be replaced by a named pipe before it is opened; opening
// that pipe for reading, or for writing, must not block the call until
// another process comes.
func TestAPipeSwappedInAfterTheCheckDoesNotHang(t *testing.T) {
	ws := tree(t, nil)
	fifo := filepath.Join(ws, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := enter(tools.Call{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	done := make(chan string, 3)
	go func() {
		// grep opens a file its walk listed as regular without a second check.
		g := &grepRun{c: Config{}.withDefaults()}
		done <- "grep: " + g.file(stdctx.Background(), p, "pipe")
		f, err := p.openRead("pipe")
		if err == nil {
			f.Close()
		}
		done <- fmt.Sprintf("openRead: %v", err)
		_, err = writeFile(p.root, "pipe", []byte("x"), nil)
		done <- fmt.Sprintf("writeFile: %v", err)
	}()
	for i := 0; i < 3; i++ {
		select {
		case got := <-done:
			t.Log(got)
		case <-time.After(10 * time.Second):
			// Let the blocked open go, so the test ends and says why.
			if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
				defer f.Close()
			}
			t.Fatalf("opening a named pipe blocked the call (step %d)", i+1)
		}
	}
}
