package host

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/session"
)

// The attachments store is one per host, opened before anything can
// deliver a prompt: beside the session files of the root persistence
// entry (a store plugin that says where, see attachmentsDirer), in memory
// when sessions are not persisted. A reload that moves the sessions does
// not move it; the next start does.

// attachmentsDirer is a persistence plugin's config that says where the
// attachments of its sessions belong.
type attachmentsDirer interface{ AttachmentsDir() string }

// openAttachments opens the store cfg calls for; dir is "" for memory.
func openAttachments(cfg *config.Config) (store *attachments.Store, dir string, err error) {
	for i := range cfg.Plugins {
		e := &cfg.Plugins[i]
		if e.Disabled {
			continue
		}
		if d, ok := cfg.PluginConfig(e).(attachmentsDirer); ok {
			dir = d.AttachmentsDir()
			break
		}
	}
	if dir == "" {
		return attachments.NewMemory(cfg.Attachments), "", nil
	}
	store, err = attachments.Open(dir, cfg.Attachments)
	if err != nil {
		return nil, "", fmt.Errorf("opening the attachments store in %s: %w", dir, err)
	}
	return store, dir, nil
}

// collectAttachments removes what a crash left in a persisted store, once
// the session logs can be read. A failure is logged, never fatal: what
// could not be checked is kept.
func (h *Host) collectAttachments() {
	if h.attachmentsDir == "" {
		return
	}
	st, err := session.Key.Get(h.root)
	if err != nil {
		return
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), h.stopTimeout)
	defer cancel()
	got, err := h.attachments.Collect(ctx, attachments.LogVerifier(st), attachments.KnownSessions(st))
	if err != nil {
		h.log.Warn("attachments: collecting what a crash left behind failed; what could not be checked is kept", "dir", h.attachmentsDir, "error", err)
		return
	}
	h.log.Debug("attachments collected", "dir", h.attachmentsDir, "result", fmt.Sprintf("%+v", got))
}
