package host

import (
	stdctx "context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

// DefaultStopTimeout bounds each stop of a plugin, and the hold of the
// admission stage, in a Reload whose ctx has no deadline.
const DefaultStopTimeout = 10 * time.Second

// Closed is the code of a Reload on a host that is closed or closing.
const Closed errs.Code = "HOST_CLOSED"

// Reload moves the running host to cfg. Entries are matched by id: an
// unchanged entry keeps running untouched, a changed one restarts with its
// new config, a removed one is disposed and a new one applied. A restarted
// or new root entry's listeners run at its config position among the root
// entries (see dshctx.Fiber.Order), as they did at start; a new entry at
// the end runs after every listener registered so far. If a plugin fails
// to start, the plugin changes are rolled back and the old config keeps
// running.
//
// While root plugins are swapped the admission stage and the approval
// stage of tool calls are held (see agentcontroller.Controller.Hold and
// tools.Service.Hold): no message and no call is decided with fewer
// listeners than the config asks for; deliveries and calls wait for the
// swap rather than pass unchecked, and are refused, never let through,
// when the swap overruns ctx. A failed reload whose rollback cannot
// restart every plugin it stopped leaves the approval stage closed: every
// tool call is refused, saying why, until a reload succeeds. ctx bounds every plugin stop and the hold;
// without a deadline each gets the host's StopTimeout. A stop that fails
// or overruns it is logged and the reload goes on. Reloads run one at a
// time; the host's lock is never held across a start or a stop, so Close
// and the getters do not wait for a reload.
//
// Agents opened with OpenAgent are their callers': a reload neither
// recreates nor disposes them, even when their template or presets
// change; the caller opens them again to take the change up, after
// Reloaded fires. A reload waits for the opens in progress and the opens
// that start meanwhile wait for it, so each open sees one config whole.
func (h *Host) Reload(ctx stdctx.Context, cfg *config.Config) error {
	defer h.announceReload()
	h.reloading.Lock()
	defer h.reloading.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return closedError()
	}
	old := h.cfg
	current := slices.Clone(h.plugins)
	h.mu.Unlock()
	// Before the new entries start: a binary is protected before it runs.
	if err := h.protectLoaded(cfg); err != nil {
		h.log.Warn("the paths the new config loads could not be added to the protected list", "error", err)
	}

	// The catalog of the presets' stores goes first, to be mounted again
	// on the config that ends up running when next needed: a store new at
	// the root takes the root's backend, which the catalog may hold.
	h.stopPresetCatalog(ctx)
	plugins, err := h.reloadPlugins(ctx, old, cfg, current)
	h.mu.Lock()
	h.plugins = plugins
	h.mu.Unlock()
	if err != nil {
		return err
	}
	h.mu.Lock()
	if h.closed {
		// Close came during the swap: what started goes with the tree.
		h.mu.Unlock()
		return closedError()
	}
	h.cfg = cfg
	h.mu.Unlock()
	if lvl := hclog.LevelFromString(orDefault(cfg.Log.Level, "info")); lvl != hclog.NoLevel {
		h.log.SetLevel(lvl)
	}
	return nil
}

// reloadPlugins swaps the root entries of old for those of cfg and returns
// the entries now running, in config order.
func (h *Host) reloadPlugins(ctx stdctx.Context, old, cfg *config.Config, current []*mounted) ([]*mounted, error) {
	newByID := map[string]*config.Entry{}
	for i := range cfg.Plugins {
		if !cfg.Plugins[i].Disabled {
			newByID[cfg.Plugins[i].ID] = &cfg.Plugins[i]
		}
	}
	var keep, stop []*mounted
	kept := map[string]bool{}
	for _, m := range current {
		if e, ok := newByID[m.entry.ID]; ok && reflect.DeepEqual(*e, m.entry) {
			keep = append(keep, m)
			kept[m.entry.ID] = true
		} else {
			stop = append(stop, m)
		}
	}
	if len(stop) == 0 && len(keep) == len(newByID) {
		if h.stagesClosed != nil {
			// A config without the plugins a failed reload lost: what
			// runs is whole again.
			h.stagesClosed()
			h.stagesClosed = nil
		}
		return current, nil
	}

	holdCtx, cancel := h.bounded(ctx)
	defer cancel()
	// Admission and tool approvals are held while plugins are swapped: a
	// message or a call decided meanwhile would hear fewer deciders than
	// the config names (policy.cel, a budget, tools.permission, a plugin
	// binary) and could pass unchecked. Stages an earlier failed reload
	// left closed stay so through this swap, and open only when it
	// succeeds.
	limit, closeStages := stdctx.WithCancelCause(holdCtx)
	defer closeStages(nil)
	release := h.stagesClosed
	closedBefore := release != nil
	h.stagesClosed = nil
	if release == nil {
		var err error
		if release, err = h.holdStages(limit); release == nil {
			// Nothing is swapped yet: the running config stays whole.
			return current, errs.Wrap(StartFailed, err, "reload refused: the admission and approval stages could not be held for the swap; the previous config keeps running")
		}
		if err != nil {
			h.log.Warn("admission and approval holds for the reload", "error", err)
		}
	}
	failedClosed := false
	defer func() {
		if failedClosed {
			h.stagesClosed = release
		} else {
			release()
		}
	}()

	for i := len(stop) - 1; i >= 0; i-- {
		h.stopPlugin(ctx, stop[i], "plugin did not stop cleanly")
	}
	var started []*mounted
	rollback := func(cause error) ([]*mounted, error) {
		for i := len(started) - 1; i >= 0; i-- {
			h.stopPlugin(ctx, started[i], "plugin did not stop cleanly while rolling back")
		}
		restored := keep
		var lost []string
		for _, m := range stop {
			e := m.entry
			again, err := h.applyAt(h.root, old, findEntry(old, e.ID, &e), "plugins(restored)", m.order)
			if err != nil {
				h.log.Error("could not restore a plugin after a failed reload", "id", e.ID, "error", err)
				lost = append(lost, e.ID)
				continue
			}
			restored = append(restored, again)
		}
		if len(lost) > 0 || closedBefore {
			// The running entries are not a whole config: admission
			// and approvals fail closed until a reload succeeds.
			failedClosed = true
			closeStages(fmt.Errorf("a config reload failed and could not restore the plugins %q, so messages and tool calls are refused until a reload succeeds", lost))
		}
		return restored, errs.Wrap(StartFailed, cause, "reload failed; the previous config keeps running")
	}
	// Each entry started takes its config position among the root
	// entries: the key of the instance it replaces when that still fits
	// between its kept neighbours, else one between them.
	keys := map[string]int64{}
	for _, m := range current {
		keys[m.entry.ID] = m.order
	}
	next := make([]int64, len(cfg.Plugins)+1) // key of the next kept entry, 0 if none
	for i := len(cfg.Plugins) - 1; i >= 0; i-- {
		next[i] = next[i+1]
		if e := &cfg.Plugins[i]; !e.Disabled && kept[e.ID] {
			next[i] = keys[e.ID]
		}
	}
	lo := h.base
	for i := range cfg.Plugins {
		e := &cfg.Plugins[i]
		if e.Disabled {
			continue
		}
		if kept[e.ID] {
			lo = max(lo, keys[e.ID])
			continue
		}
		if h.isClosed() {
			return rollback(closedError())
		}
		key := placeBetween(keys[e.ID], lo, next[i+1])
		m, err := h.applyAt(h.root, cfg, e, fmt.Sprintf("plugins[%d]", i), key)
		if err != nil {
			return rollback(err)
		}
		started = append(started, m)
		lo = key
	}
	return append(keep, started...), nil
}

// placeBetween picks the ordering key of a root entry started on reload,
// to run after lo and before hi (0: nothing kept after it): its previous
// key when that fits, else one between, else a fresh one — after every
// listener registered so far, which is all there is left when the kept
// entries themselves are out of config order or no key fits.
func placeBetween(previous, lo, hi int64) int64 {
	if previous > lo && (hi == 0 || previous < hi) {
		return previous
	}
	if hi != 0 {
		if k, ok := waterfall.Between(lo, hi); ok {
			return k
		}
	}
	return waterfall.Position()
}

func (h *Host) stopPlugin(ctx stdctx.Context, m *mounted, msg string) {
	sctx, cancel := h.bounded(ctx)
	defer cancel()
	if err := m.fiber.Dispose(sctx); err != nil {
		h.log.Warn(msg, "id", m.entry.ID, "error", err)
	}
}

// bounded returns ctx if it has a deadline, else ctx bounded by the
// host's stop timeout.
func (h *Host) bounded(ctx stdctx.Context) (stdctx.Context, stdctx.CancelFunc) {
	if ctx == nil {
		ctx = stdctx.Background()
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return stdctx.WithTimeout(ctx, h.stopTimeout)
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

func closedError() error {
	return errs.New(Closed, "the host is closed or closing; a reload cannot apply — start a new host")
}

// Reloaded returns a channel closed when the next Reload has finished,
// whether it succeeded or not: whoever holds an opened agent and wants the
// new config's template or presets opens it again then.
func (h *Host) Reloaded() <-chan struct{} {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	return h.reloaded
}

func (h *Host) announceReload() {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	close(h.reloaded)
	h.reloaded = make(chan struct{})
}

// findEntry returns the entry of cfg with id, so its decoded config is
// found; fallback when it is not there.
func findEntry(cfg *config.Config, id string, fallback *config.Entry) *config.Entry {
	for i := range cfg.Plugins {
		if cfg.Plugins[i].ID == id {
			return &cfg.Plugins[i]
		}
	}
	return fallback
}

// stopPresetCatalog disposes the catalog of the presets' stores, bounded.
func (h *Host) stopPresetCatalog(ctx stdctx.Context) {
	h.mu.Lock()
	f := h.presetCatalog
	h.presetCatalog = nil
	h.mu.Unlock()
	if f == nil {
		return
	}
	sctx, cancel := h.bounded(ctx)
	defer cancel()
	if err := f.Dispose(sctx); err != nil {
		h.log.Warn("the catalog of the presets' session stores did not stop cleanly", "error", err)
	}
}

// holdStages holds the admission stage, then the approval stage, until
// limit ends (then each refuses) or the returned release. A nil release
// means neither is held; err with a release reports decisions that were
// still running when limit ended.
func (h *Host) holdStages(limit stdctx.Context) (func(), error) {
	releaseAdmission, aerr := h.controller.Hold(limit)
	if releaseAdmission == nil {
		return nil, aerr
	}
	releaseApprovals, perr := h.tools.Hold(limit)
	if releaseApprovals == nil {
		releaseAdmission()
		return nil, perr
	}
	return func() { releaseApprovals(); releaseAdmission() }, errors.Join(aerr, perr)
}
