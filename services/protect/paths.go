package protect

import (
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
)

// PathsID is the id of the plugin that adds the operator's own entries.
const PathsID = "protect.paths"

// PathsConfig is protect.paths' configuration.
type PathsConfig struct {
	// Paths are added to the tree's list while the entry is mounted: a
	// relative path protects that name anywhere in a workspace, an
	// absolute one that file or folder.
	Paths []Entry `koanf:"paths" json:"paths"`
}

// Validate refuses an entry without a path.
func (c PathsConfig) Validate() error {
	for i, e := range c.Paths {
		if e.Path == "" {
			return errs.New(errs.InvalidArgument, fmt.Sprintf("%s: paths[%d] has no path; give a file or folder, relative (any workspace) or absolute", PathsID, i))
		}
	}
	return nil
}

// PathsPlugin is protect.paths: the configurable part of the list.
var PathsPlugin = plugin.Register(PathsID, "adds the operator's own paths to the protected-path list the file tools and the bash sandbox honour",
	func(ctx *dshctx.Context, cfg PathsConfig) error {
		entries := make([]Entry, len(cfg.Paths))
		for i, e := range cfg.Paths {
			if e.What == "" {
				e.What = fmt.Sprintf("a path the operator protected (%s)", PathsID)
			}
			entries[i] = e
		}
		return Register(ctx, entries...)
	}, Key)
