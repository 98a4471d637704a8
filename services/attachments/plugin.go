package attachments

import (
	dshctx "github.com/dsh-go/dsh/context"
)

// Key is the service key.
var Key = dshctx.NewKey[*Store]("attachments")

// Options configure the service.
type Options struct {
	// Dir keeps the blobs on disk — an attachments/ directory beside the
	// session files; empty keeps them in memory, for sessions that are
	// not persisted.
	Dir    string `koanf:"dir" json:"dir,omitempty"`
	Limits Limits `koanf:",squash" json:",inline"`
}

// Plugin provides the store. Its config is an Options value (or nil: in
// memory, default limits), given by the code that mounts it. It does not
// collect: the session logs Collect reads are not loaded yet when core
// services start; the host calls Collect once persistence is up.
var Plugin = dshctx.Define("attachments", func(ctx *dshctx.Context, o Options) error {
	s := NewMemory(o.Limits)
	if o.Dir != "" {
		var err error
		if s, err = Open(o.Dir, o.Limits); err != nil {
			return err
		}
	}
	return Key.Provide(ctx, s)
})

// Provided is a plugin that provides s itself: for a host that opens the
// store once and hands it to the session controller too
// (sessions.Options.Attachments), so prompts, model requests and
// deletions all use the same store. The store is closed when the plugin
// is disposed: the host mounts it for the life of its tree.
func Provided(s *Store) dshctx.Plugin {
	return dshctx.Define("attachments", func(ctx *dshctx.Context, _ dshctx.None) error {
		if _, err := ctx.OnDispose("close the attachments store", s.Close); err != nil {
			return err
		}
		return Key.Provide(ctx, s)
	})
}
