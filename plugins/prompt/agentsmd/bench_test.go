package agentsmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchRepo makes a repository depth directories deep with an AGENTS.md
// of size bytes at its root and in the workspace, and lays it out.
func benchRepo(b *testing.B, depth, size int, names []string) layout {
	root := b.TempDir()
	if err := os.Mkdir(filepath.Join(root, ".git"), 0o755); err != nil {
		b.Fatal(err)
	}
	ws := root
	for i := 1; i < depth; i++ {
		ws = filepath.Join(ws, fmt.Sprintf("d%d", i))
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("Run go test ./... before committing.\n", size/37+1)[:size]
	for _, d := range []string{root, ws} {
		if err := os.WriteFile(filepath.Join(d, "AGENTS.md"), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	l, err := discover(ws, names, "")
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkTurnCheck is what reload costs per turn when nothing changed:
// one stat per candidate (directories from the root to the workspace,
// times the names).
func BenchmarkTurnCheck(b *testing.B) {
	for _, c := range []struct {
		depth int
		names []string
	}{{1, []string{"AGENTS.md"}}, {3, []string{"AGENTS.md"}}, {8, []string{"AGENTS.md"}}, {3, []string{"AGENTS.md", "CLAUDE.md"}}} {
		b.Run(fmt.Sprintf("dirs=%d/names=%d", c.depth, len(c.names)), func(b *testing.B) {
			l := benchRepo(b, c.depth, 4096, c.names)
			stamps, _ := l.stat(nil)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var changed bool
				if stamps, changed = l.stat(stamps); changed {
					b.Fatal("nothing changed")
				}
			}
		})
	}
}

// BenchmarkReread is what a change costs once: read the files through
// the os.Root and render the section.
func BenchmarkReread(b *testing.B) {
	for _, size := range []int{4 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("dirs=3/2files/%dKiB", size>>10), func(b *testing.B) {
			l := benchRepo(b, 3, size, []string{"AGENTS.md"})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if render(&l, l.read(16<<10, 32<<10, func(string, error) { b.Fatal("skipped") })) == "" {
					b.Fatal("no text")
				}
			}
		})
	}
}
