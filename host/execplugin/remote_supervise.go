package execplugin

import (
	"fmt"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/telemetry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Restart policy defaults: a crash counts against max_restarts and the
// backoff for DefaultRestartWindow, so a plugin that ran stable that long
// starts over with a full budget and the shortest backoff.
const (
	DefaultMaxRestarts   = 5
	DefaultRestartWindow = 10 * time.Minute
	firstBackoff         = 100 * time.Millisecond
	maxBackoff           = 30 * time.Second
)

// restartLimit is how many crashes within the window are restarted.
func (r *remote) restartLimit() int {
	switch n := r.entry.MaxRestarts; {
	case n == 0:
		return DefaultMaxRestarts
	case n < 0:
		return 0 // -1: never restart
	default:
		return n
	}
}

func (r *remote) restartWindow() time.Duration {
	if r.entry.RestartWindow > 0 {
		return r.entry.RestartWindow
	}
	return DefaultRestartWindow
}

// crashed records a crash at now and returns the crashes within the
// window, this one included.
func (r *remote) crashed(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.crashes[:0]
	for _, t := range r.crashes {
		if now.Sub(t) < r.restartWindow() {
			kept = append(kept, t)
		}
	}
	r.crashes = append(kept, now)
	return len(r.crashes)
}

// restartBackoff doubles with each crash in the window.
func restartBackoff(crashes int) time.Duration {
	d := firstBackoff
	for i := 1; i < crashes && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// supervise restarts the process when it exits, with backoff, until it
// crashed more than max_restarts times within restart_window.
func (r *remote) supervise() {
	defer close(r.down)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	checked := time.Now()
	for {
		probe := false
		select {
		case <-r.stop:
			return
		case <-tick.C:
			probe = time.Since(checked) >= r.healthInterval()
		case <-r.probe:
			probe = true
		}
		r.mu.Lock()
		old := r.proc
		r.mu.Unlock()
		// A process already found stuck is being killed: checking it again
		// would only replace the reason with a reset connection's.
		if probe && !old.client.Exited() && r.stuckReason() == nil {
			checked = time.Now()
			if err := r.checkHealth(); err != nil {
				r.markStuck(err)
			}
		}
		if !old.client.Exited() {
			continue
		}
		crashes := r.crashed(time.Now())
		if crashes > r.restartLimit() {
			r.giveUp(crashes)
			return
		}
		backoff := restartBackoff(crashes)
		if m := telemetry.M(); m != nil {
			m.PluginRestarts.Add(1, r.entry.ID)
		}
		r.log.Warn("plugin exited; restarting", "in", backoff, "crashes", crashes, "within", r.restartWindow(), "max_restarts", r.restartLimit())
		wait := time.NewTimer(backoff)
		select {
		case <-r.stop:
			wait.Stop()
			return
		case <-wait.C:
		}
		old.stop(r.log)
		desc, p, err := r.start(r.stopCtx)
		if err != nil {
			// The old process stays current, exited: the next tick counts
			// this as another crash and tries again.
			r.log.Error("plugin restart failed", "error", err)
			continue
		}
		r.redeclared(desc.Tools)
		r.mu.Lock()
		r.proc = p
		r.stuck = nil
		r.mu.Unlock()
		checked = time.Now()
	}
}

// giveUp stops supervising: logged once here, and every call refused
// afterwards says so.
func (r *remote) giveUp(crashes int) {
	r.mu.Lock()
	r.givenUp = crashes
	r.mu.Unlock()
	r.log.Error(fmt.Sprintf("plugin %q (%s) crashed %d times within %s, more than max_restarts (%d); dsh gave up on it and it stays down until dsh restarts or the config is reloaded with it changed",
		r.entry.ID, r.entry.Exec, crashes, r.restartWindow(), r.restartLimit()))
}

// unavailable is the error of a call while the plugin is down.
func (r *remote) unavailable() error {
	r.mu.Lock()
	n := r.givenUp
	r.mu.Unlock()
	if n > 0 {
		return errs.New(PluginCrashed, fmt.Sprintf(
			"plugin %q (%s) was given up after %d crashes within %s and stays down; see the log for why it crashed, fix it, then reload or restart dsh",
			r.entry.ID, r.entry.Exec, n, r.restartWindow())).WithReason(ReasonGivenUp)
	}
	if stuck := r.stuckReason(); stuck != nil {
		return stuck
	}
	return errs.New(PluginCrashed, fmt.Sprintf("plugin %q (%s) is not running; it is being restarted", r.entry.ID, r.entry.Exec)).WithReason(ReasonUnavailable)
}

// stuckReason is why the plugin failed its health check, while it is
// restarted because of it.
func (r *remote) stuckReason() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stuck
}

// whileDown is what a listener's call gets while the plugin is down: passed
// over with on_unavailable: skip, refused as unavailable otherwise.
func (r *remote) whileDown() error {
	if r.entry.OnUnavailable == "skip" {
		return errSkip
	}
	return r.unavailable()
}

// notConnected reports a call that failed before it reached the plugin:
// gRPC could not (re)connect to its socket, which is what a call made
// after the process died but before the supervisor saw it exit gets
// ("connection refused", or the TLS handshake cut by the dying process).
// Such a call did not crash anything; the plugin is unavailable. A call
// cut by a crash in flight fails differently ("error reading from server",
// "transport is closing").
func notConnected(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable && strings.HasPrefix(st.Message(), "connection error:")
}
