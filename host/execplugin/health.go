package execplugin

import (
	stdctx "context"
	"fmt"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// A process that is alive but stuck — stopped, deadlocked, its every
// worker hung — never exits, so waiting for an exit never restarts it.
// The supervisor therefore asks the plugin the protocol's own question,
// go-plugin's gRPC health check of service "plugin", on an interval and
// right after a call timed out, and restarts a plugin that does not answer
// in time or answers NOT_SERVING.
const (
	// DefaultHealthInterval is how often a plugin is checked when its
	// entry sets no health_interval.
	DefaultHealthInterval = 10 * time.Second
	// DefaultHealthTimeout bounds a check when the entry sets no
	// health_timeout: ample for a loopback round trip, short enough that
	// callers fail closed quickly.
	DefaultHealthTimeout = 2 * time.Second
)

// Codes and reasons of health.
const (
	// PluginUnhealthy: the plugin failed its health check and is being
	// restarted; calls are refused until the new process serves.
	PluginUnhealthy errs.Code = "PLUGIN_UNHEALTHY"
	// ReasonUnhealthy marks the refusal of a call while a plugin that
	// failed its health check is restarted.
	ReasonUnhealthy = "host/plugin-unhealthy"
	// PluginBusy: the plugin refused the call at once because every one of
	// its workers is busy (gRPC RESOURCE_EXHAUSTED): back-pressure, not a
	// failure of the plugin.
	PluginBusy errs.Code = "PLUGIN_BUSY"
	// ReasonBusy marks a PLUGIN_BUSY refusal.
	ReasonBusy = "host/plugin-busy"
	// healthService is the service name go-plugin registers its health
	// status under, and what every SDK answers for.
	healthService = plugin.GRPCServiceName
)

func (r *remote) healthInterval() time.Duration {
	if r.entry.HealthInterval > 0 {
		return r.entry.HealthInterval
	}
	return DefaultHealthInterval
}

func (r *remote) healthTimeout() time.Duration {
	if r.entry.HealthTimeout > 0 {
		return r.entry.HealthTimeout
	}
	return DefaultHealthTimeout
}

// probeSoon asks the supervisor for a health check now, after a call timed
// out: a timeout is the first sign of a stuck plugin. Never blocks; one
// pending request is enough.
func (r *remote) probeSoon() {
	select {
	case r.probe <- struct{}{}:
	default:
	}
}

// checkHealth runs one health check of the current process. It returns
// nil for a healthy plugin, and for one whose health cannot be judged: a
// plugin that serves no health service (not every language's SDK does),
// or one refusing the check because every worker is busy — busy is not
// stuck, and back-pressure already answers its callers.
func (r *remote) checkHealth() error {
	r.mu.Lock()
	client, p := r.health, r.proc
	r.mu.Unlock()
	if client == nil || p.client == nil || p.client.Exited() {
		return nil // down: the exit path restarts it
	}
	ctx, cancel := stdctx.WithTimeout(r.stopCtx, r.healthTimeout())
	defer cancel()
	res, err := client.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: healthService})
	if r.stopCtx.Err() != nil || p.client.Exited() {
		return nil
	}
	switch code := status.Code(err); {
	case err == nil && res.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING:
		return nil
	case err == nil:
		return errs.New(PluginUnhealthy, fmt.Sprintf(
			"plugin %q (%s) answered its health check with %s (its calls are stuck); restarting it",
			r.entry.ID, r.entry.Exec, res.GetStatus())).WithReason(ReasonUnhealthy)
	case code == codes.Unimplemented, code == codes.ResourceExhausted:
		return nil
	case code == codes.DeadlineExceeded || ctx.Err() != nil:
		return errs.New(PluginUnhealthy, fmt.Sprintf(
			"plugin %q (%s) did not answer its health check in %s; restarting it (health_timeout in its entry sets the bound)",
			r.entry.ID, r.entry.Exec, r.healthTimeout())).WithReason(ReasonUnhealthy)
	default:
		return errs.Wrap(PluginUnhealthy, err, fmt.Sprintf(
			"plugin %q (%s) failed its health check; restarting it", r.entry.ID, r.entry.Exec)).WithReason(ReasonUnhealthy)
	}
}

// markStuck fails the plugin closed with why, and kills its process
// group: no graceful shutdown, since a stuck plugin would not honour one.
// The exit path of the supervisor then restarts it within max_restarts,
// as for a crash; the reason stays until the new process serves.
func (r *remote) markStuck(why error) {
	r.mu.Lock()
	r.stuck = why
	p := r.proc
	r.mu.Unlock()
	r.log.Error(why.Error())
	p.proc.Kill()
}

// busyError is the refusal of a plugin at its concurrency limit, with the
// plugin's own explanation (which names the setting to raise).
func (r *remote) busyError(err error) error {
	return errs.New(PluginBusy, fmt.Sprintf(
		"plugin %q (%s) refused the call at once (%s); it recovers when a call returns, or is restarted once every worker hangs in a call dsh gave up on",
		r.entry.ID, r.entry.Exec, status.Convert(err).Message())).WithReason(ReasonBusy)
}
