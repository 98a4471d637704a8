package hooks

import (
	"path/filepath"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/protect"
)

// protectFiles puts the hooks files this entry read on the tree's
// protected-path list for as long as the entry is mounted: their commands
// run as dsh's user, outside any sandbox, so an agent's file tools must not
// rewrite them without a person's approval. Relative names resolve as the
// files were read, from the directory dsh started in.
func protectFiles(ctx *dshctx.Context, files []string) error {
	var entries []protect.Entry
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			continue // it was read, so this cannot fail in practice
		}
		entries = append(entries, protect.Entry{Path: abs, What: "a hooks file of dsh: its commands run as dsh's user, outside any sandbox, when dsh starts and at every hook event"})
		// The same file through its real location, when it is reached
		// through a symlink.
		if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
			entries = append(entries, protect.Entry{Path: real, What: entries[len(entries)-1].What})
		}
	}
	return protect.Register(ctx, entries...)
}
