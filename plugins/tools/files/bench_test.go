package files

import (
	stdctx "context"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// BenchmarkGrepTree searches a tree of 200 files of 100 lines (about
// 0.6 MB) with a .gitignore, the shape of a small repository.
func BenchmarkGrepTree(b *testing.B) {
	files := map[string]string{".gitignore": "*.log\nvendor/\n"}
	for i := range 200 {
		var body strings.Builder
		for j := range 100 {
			fmt.Fprintf(&body, "func f%d_%d() { return %d } // some text to scan\n", i, j, i*j)
		}
		files[fmt.Sprintf("pkg%d/file%d.go", i%10, i)] = body.String()
	}
	ws := tree(b, files)
	var grep tools.Tool
	for _, t := range (Config{}).withDefaults().build() {
		if t.Name == "grep" {
			grep = t
		}
	}
	call := tools.Call{Name: "grep", Arguments: []byte(`{"pattern":"return 4[0-9]{3} "}`), Workspace: ws}
	b.ReportAllocs()
	for b.Loop() {
		if r, err := grep.Execute(stdctx.Background(), call); err != nil || r.IsError {
			b.Fatal(r.Content, err)
		}
	}
}

// BenchmarkWrite is one write of a small file through the tool: with the
// protected-path check (the name, the resolved file, then the opened file)
// and with it lifted, to show what the check costs.
func BenchmarkWrite(b *testing.B) {
	for _, mode := range []string{ProtectedAsk, ProtectedAllow} {
		b.Run("protected_writes="+mode, func(b *testing.B) {
			ws := tree(b, map[string]string{"src/a.go": "package a\n"})
			c := Config{ProtectedWrites: mode}.withDefaults()
			raw := []byte(`{"path":"src/a.go","content":"package a\n"}`)
			b.ReportAllocs()
			for range b.N {
				if r, _ := c.write(b.Context(), tools.Call{Name: "write", Arguments: raw, Workspace: ws}); r.IsError {
					b.Fatal(r.Content)
				}
			}
		})
	}
}
