package host

import (
	"path/filepath"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/protect"
)

// protectLoaded adds to the tree's protected-path list what this config
// makes dsh load or keep: the config file, plugin binaries, session stores,
// the attachments store and serve's state. A model that rewrote one of them
// would run code as dsh's user, or feed itself history, the next time dsh
// starts. The entries stay for the host's life: after a reload a path the
// new config no longer names stays protected, which errs on the safe side.
func (h *Host) protectLoaded(cfg *config.Config) error {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(cfg.WorkingDir(), p)
	}
	var entries []protect.Entry
	if cfg.File != "" {
		entries = append(entries, protect.Entry{Path: abs(cfg.File), What: "dsh's config file: it names the plugins, binaries and hooks dsh runs"})
	}
	lists := [][]config.Entry{cfg.Plugins}
	for _, name := range cfg.DefinedPresets() {
		if list, err := cfg.Preset(name); err == nil {
			lists = append(lists, list)
		}
	}
	for _, list := range lists {
		for _, e := range list {
			if e.Exec != "" {
				entries = append(entries, protect.Entry{Path: cfg.ExecPath(e.Exec), What: "a plugin binary dsh runs (exec: in its config), with dsh's rights"})
				for _, f := range e.Pin {
					entries = append(entries, protect.Entry{Path: f.File, What: "a file a plugin binary runs, pinned by pin: in dsh's config"})
				}
			}
		}
	}
	for _, dir := range cfg.StoreDirs() {
		entries = append(entries, protect.Entry{Path: dir, What: "dsh's session store: recorded sessions are resumed as trusted history", Secret: true})
	}
	if h.attachmentsDir != "" {
		entries = append(entries, protect.Entry{Path: abs(h.attachmentsDir), What: "dsh's attachments store", Secret: true})
	}
	entries = append(entries, protect.Entry{Path: abs(cfg.ServeStateDir()), What: "dsh serve's state (its token and sessions)", Secret: true})
	return protect.Register(h.root, entries...)
}
