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
	path := config.ResolvePath(opts)
	last, _ := os.ReadFile(path)
	done := make(chan struct{})
	finished := make(chan struct{})
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			cur, err := os.ReadFile(path)
			if err != nil || bytes.Equal(cur, last) {
				continue
			}
			last = cur
			log := h.Logger()
			cfg, err := config.Load(opts)
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
