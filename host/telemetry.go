package host

import (
	stdctx "context"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	"github.com/hashicorp/go-hclog"
)

// startTelemetry installs the telemetry the config (and the OTEL_*
// variables) ask for, unless this process already has a provider: then
// the host joins it and leaves its shutdown to its owner. It returns the
// provider the host owns, or nil.
func startTelemetry(cfg *config.Config, log hclog.Logger) (*provider.Provider, error) {
	tc, err := cfg.TelemetryConfig()
	if err != nil {
		return nil, errs.Wrap(StartFailed, err, "telemetry: the settings are refused")
	}
	if !tc.On() || telemetry.Installed() {
		return nil, nil
	}
	p, err := provider.Setup(stdctx.Background(), tc)
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

// Telemetry returns the telemetry provider this host set up, or nil when
// telemetry is off or another host of the process owns it.
func (h *Host) Telemetry() *provider.Provider { return h.telemetry }
