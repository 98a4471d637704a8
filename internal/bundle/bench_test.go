package bundle

import "testing"

// BenchmarkLoadDocumentedBundle: reading and checking the documented
// bundle (manifest, one command, skill, agent, hooks file and two MCP
// servers) — the cost a bundle adds to every config load and reload.
func BenchmarkLoadDocumentedBundle(b *testing.B) {
	dir := b.TempDir()
	write(b, dir, documented)
	lookup := env("DB_URL=postgres://db", "API_TOKEN=t")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(dir, lookup); err != nil {
			b.Fatal(err)
		}
	}
}
