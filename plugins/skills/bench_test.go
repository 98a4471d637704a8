package skills

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkScan is the work done at the start of every turn: the folders
// read and each SKILL.md parsed, for 10 skills in one folder and three
// folders that do not exist (the defaults' common case).
func BenchmarkScan(b *testing.B) {
	ws := b.TempDir()
	for i := range 10 {
		name := fmt.Sprintf("skill-%d", i)
		p := filepath.Join(ws, ".claude", "skills", name, "SKILL.md")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, fmt.Appendf(nil, "---\nname: %s\ndescription: Does thing %d. Use when asked about thing %d.\nlicense: MIT\n---\n\n# Thing\n\n%s", name, i, i, make([]byte, 0)), 0o644)
	}
	dirs := resolve(DefaultPaths, ws, b.TempDir())
	var c cache
	b.ReportAllocs()
	for b.Loop() {
		list, problems := c.scan(dirs)
		if len(list) != 10 || len(problems) != 0 {
			b.Fatal(list, problems)
		}
		_ = render(list)
	}
}

// BenchmarkScanEmpty is the per-turn cost for an agent with no skills.
func BenchmarkScanEmpty(b *testing.B) {
	dirs := resolve(DefaultPaths, b.TempDir(), b.TempDir())
	b.ReportAllocs()
	for b.Loop() {
		scan(dirs)
	}
}
