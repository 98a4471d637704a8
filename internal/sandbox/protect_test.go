//go:build linux

package sandbox_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/sandbox"
)

// TestAPlaceholderOutlivesTheFirstOfTwoRuns: two commands in one
// workspace share the placeholder of a missing protected path; the first
// to end must not remove it, which would detach the second's read-only
// mount and let it create the path.
func TestAPlaceholderOutlivesTheFirstOfTwoRuns(t *testing.T) {
	st := namespaced(t)
	ws := t.TempDir()
	r := sandbox.Rules{Writable: []string{ws}, ReadOnly: []string{filepath.Join(ws, "AGENTS.md")}}
	first := exec.Command("/bin/true")
	second := exec.Command("/bin/bash", "-c", `while [ ! -e go ]; do sleep 0.01; done
echo evil > AGENTS.md && echo WROTE; echo end`)
	second.Dir = ws
	var out bytes.Buffer
	second.Stdout, second.Stderr = &out, &out
	var entries []*sandbox.Entry
	for _, cmd := range []*exec.Cmd{first, second} {
		e, err := sandbox.Attach(cmd, r, st)
		if err != nil {
			t.Fatal(err)
		}
		startErr := cmd.Start()
		e.Started()
		if startErr != nil {
			t.Fatal(startErr)
		}
		entries = append(entries, e)
	}
	_ = first.Wait()
	if err := entries[0].Err(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = second.Wait()
	if err := entries[1].Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "WROTE") || !strings.Contains(out.String(), "end") {
		t.Fatalf("the second command created the protected path once the first ended:\n%s", out.String())
	}
	if _, err := os.Lstat(filepath.Join(ws, "AGENTS.md")); err == nil {
		t.Fatal("the placeholder is left after both runs")
	}
}

// TestSubmoduleConfigsAreProtectedWithTheRepository: protecting
// .git/config protects the configuration, hooks and commondir of the submodules git
// keeps in .git/modules, nested ones and names with slashes included,
// while their objects stay writable.
func TestSubmoduleConfigsAreProtectedWithTheRepository(t *testing.T) {
	st := namespaced(t)
	ws := t.TempDir()
	for _, g := range []string{".git", ".git/modules/sub", ".git/modules/libs/json", ".git/modules/sub/modules/deep"} {
		if err := os.MkdirAll(filepath.Join(ws, g, "objects"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{"HEAD": "ref: refs/heads/main\n", "config": "[core]\n"} {
			if err := os.WriteFile(filepath.Join(ws, g, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := sandbox.Rules{Writable: []string{ws}, ReadOnly: []string{filepath.Join(ws, ".git/config")}}
	out, _, entryErr := run(t, st, r, "cd "+ws+`
for g in .git/modules/sub .git/modules/libs/json .git/modules/sub/modules/deep; do
  echo '[core] fsmonitor = evil' >> $g/config && echo "WROTE $g"
  mkdir -p $g/hooks 2>/dev/null; echo evil > $g/hooks/post-checkout && echo "HOOK $g"
  echo ../../../evil > $g/commondir && echo "COMMONDIR $g"
  mv $g $g.old 2>/dev/null && echo "MOVED $g"
  touch $g/objects/ok && echo "OBJECTS $g"
done`)
	if entryErr != nil {
		t.Fatal(entryErr)
	}
	if strings.Count(out, "OBJECTS ") != 3 || strings.Contains(out, "WROTE") || strings.Contains(out, "HOOK") || strings.Contains(out, "MOVED") || strings.Contains(out, "COMMONDIR") {
		t.Fatalf("want every submodule's config and hooks read-only and its objects writable:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git/modules/sub/config")); string(b) != "[core]\n" {
		t.Fatalf("a submodule's config changed on disk: %q", b)
	}
}
