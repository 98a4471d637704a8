package host

import (
	stdctx "context"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/hashicorp/go-hclog"
)

// startTelemetry installs the telemetry the config (and the OTEL_*
// variables) ask for, unless this process already has a provider: then
// the host joins it and leaves its shutdown to its owner. It returns the
// provider the host owns, or nil.
func startTelemetry(cfg *config.Config, log hclog.Logger) (*telemetry.Provider, error) {
	tc, err := cfg.TelemetryConfig()
	if err != nil {
		return nil, errs.Wrap(StartFailed, err, "telemetry: the settings are refused")
	}
	if !tc.On() || telemetry.Current() != nil {
		return nil, nil
	}
	p, err := telemetry.Setup(stdctx.Background(), tc)
	if err != nil {
		return nil, errs.Wrap(StartFailed, err, "telemetry cannot start")
	}
	ratio := 1.0
	if tc.Sampling != nil {
		ratio = *tc.Sampling
	}
	log.Info("telemetry on", "endpoint", tc.Endpoint, "protocol", tc.Protocol, "sampling", ratio, "content", tc.Content, "prometheus", tc.Prometheus.Enabled)
	return p, nil
}

// Telemetry returns the process's telemetry provider, or nil when off.
func (h *Host) Telemetry() *telemetry.Provider { return telemetry.Current() }
