package editor_test

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/services/editor"
)

// readOnly is an editor that lends its buffers for reading only.
type readOnly map[string]string

func (r readOnly) ReadTextFile(_ stdctx.Context, path string) (string, error) {
	if t, ok := r[path]; ok {
		return t, nil
	}
	return "", fmt.Errorf("%s is not open", path)
}

func (readOnly) WriteTextFile(stdctx.Context, string, string) error { return editor.ErrNotOffered }

// An entry point lends its editor to a tool call's context; a file tool
// asks for it and falls back to the disk when there is none or it cannot
// answer.
func Example() {
	ctx := editor.With(stdctx.Background(), readOnly{"/ws/a.go": "package a // unsaved"})

	if ed, ok := editor.From(ctx); ok {
		text, _ := ed.ReadTextFile(ctx, "/ws/a.go")
		fmt.Println(text)
		fmt.Println(ed.WriteTextFile(ctx, "/ws/a.go", "x") == editor.ErrNotOffered)
	}
	_, ok := editor.From(stdctx.Background())
	fmt.Println(ok)
	// Output:
	// package a // unsaved
	// true
	// false
}
