package host

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/session"
)

// The attachments store is one per host, opened before anything can
// deliver a prompt, in the same backend as the session logs of the root
// persistence entry: a store plugin with a backend of its own (session.nats:
// a JetStream object store every host sharing the stream reads, see
// attachmentsBackender), else beside its session files (attachmentsDirer),
// else in memory when sessions are not persisted. A reload that moves the
// sessions does not move it; the next start does. The store's backend is
// closed with the tree (attachments.Provided).

// attachmentsBackender is a persistence plugin's config whose sessions
// keep their attachments in a backend of its own.
type attachmentsBackender interface {
	AttachmentsBackend() (attachments.Backend, error)
}

// attachmentsDirer is a persistence plugin's config that says where the
// attachments of its sessions belong.
type attachmentsDirer interface{ AttachmentsDir() string }

// openAttachments opens the store cfg calls for; dir is "" unless it is a
// directory.
func openAttachments(cfg *config.Config) (store *attachments.Store, dir string, err error) {
	for i := range cfg.Plugins {
		e := &cfg.Plugins[i]
		if e.Disabled {
			continue
		}
		switch c := cfg.PluginConfig(e).(type) {
		case attachmentsBackender:
			b, err := c.AttachmentsBackend()
			if err != nil {
				return nil, "", fmt.Errorf("opening the attachments store of %s: %w", e.Use, err)
			}
			return attachments.NewStore(b, cfg.Attachments), "", nil
		case attachmentsDirer:
			return openDir(cfg, c.AttachmentsDir())
		}
	}
	return openDir(cfg, "")
}

// openDir opens the store in dir, or in memory when dir is "".
func openDir(cfg *config.Config, dir string) (store *attachments.Store, _ string, err error) {
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
	if !h.attachments.Persistent() {
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
