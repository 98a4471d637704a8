package main

import (
	"bytes"
	stdctx "context"
	"os"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
)

// watch polls the config file and reloads the host when its content
// changes. Polling, rather than file events, also sees editors that replace
// the file. A config that fails to load or apply is logged and the running
// one stays. Stopping the watch cuts short the teardown of a reload in
// progress.
func watch(h *host.Host, opts config.LoadOptions, every time.Duration) (stop func()) {
	tick := time.NewTicker(every)
	stopWatching := watchTicks(h, opts, tick.C, os.ReadFile)
	return func() { stopWatching(); tick.Stop() }
}

// watchTicks is watch driven by ticks, each of which reads the file once
// with read.
func watchTicks(h *host.Host, opts config.LoadOptions, ticks <-chan time.Time, read func(string) ([]byte, error)) (stop func()) {
	path := config.ResolvePath(opts)
	last, _ := read(path)
	// pending is a change seen once, applied when the next read agrees;
	// seen tells an empty pending file from none.
	var pending []byte
	seen := false
	done := make(chan struct{})
	finished := make(chan struct{})
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-ticks:
			}
			cur, err := read(path)
			if err != nil || bytes.Equal(cur, last) {
				pending, seen = nil, false
				continue
			}
			// An editor that saves in place truncates, then writes: a read
			// in between sees a half-written or empty file, and an empty
			// config is a valid one that stops everything. A change is
			// applied once two reads a tick apart agree on it.
			if !seen || !bytes.Equal(cur, pending) {
				pending, seen = cur, true
				continue
			}
			last, pending, seen = cur, nil, false
			log := h.Logger()
			// What is applied is what was compared, not a later read.
			cfg, err := config.Parse(path, cur, opts)
			if err != nil {
				log.Error("config changed but does not load; keeping the running config", "file", path, "error", err)
				continue
			}
			if err := h.Reload(ctx, cfg); err != nil {
				log.Error("config changed but does not apply; keeping the running config", "file", path, "error", err)
				continue
			}
			log.Info("config reloaded", "file", path)
		}
	}()
	return func() { cancel(); close(done); <-finished }
}
