package commands

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParsePlainPrompt is what every prompt that is not a command
// costs the admission stage.
func BenchmarkParsePlainPrompt(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Parse("please review the change in src/main.go"); ok {
			b.Fatal("parsed")
		}
	}
}

// BenchmarkInvoke is what an invocation costs: the folders scanned (10
// command files), the command found and expanded.
func BenchmarkInvoke(b *testing.B) {
	ws := b.TempDir()
	dir := filepath.Join(ws, ".claude", "commands")
	os.MkdirAll(filepath.Join(dir, "ns"), 0o755)
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "ns/i", "review-pr"} {
		os.WriteFile(filepath.Join(dir, n+".md"), []byte("---\nargument-hint: [pr-number] [priority] [assignee]\ndescription: Review pull request\n---\n\nReview PR #$1 with priority $2 and assign to $3.\nFocus on security, performance, and code style.\n"), 0o644)
	}
	dirs := resolve(DefaultPaths, ws, b.TempDir())
	b.ReportAllocs()
	for b.Loop() {
		inv, _ := Parse("/review-pr 456 high alice")
		list, _ := scan(dirs)
		c, ok := lookup(list, inv.Name)
		if !ok {
			b.Fatal("not found")
		}
		if _, err := Expand(c, inv.Args); err != nil {
			b.Fatal(err)
		}
	}
}
