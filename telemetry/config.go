package telemetry

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
)

// Protocols an OTLP exporter speaks.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Reason is the errs reason of every refused telemetry setting.
const Reason = "telemetry/invalid-config"

// Config is the telemetry: block of config.yaml. Its zero value is off.
// The standard OTEL_* variables fill in what the block leaves unset (see
// FromEnv); the block wins where both speak.
type Config struct {
	// Enabled turns telemetry on. Unset, it is on when OTEL_TRACES_EXPORTER
	// or OTEL_EXPORTER_OTLP_ENDPOINT asks for an exporter and
	// OTEL_SDK_DISABLED is not true; false keeps it off whatever the
	// environment says.
	Enabled *bool `koanf:"enabled"`
	// Endpoint is the OTLP receiver: host:port for grpc, a URL for
	// http/protobuf (default: the exporter's own, localhost:4317 or
	// http://localhost:4318). Empty with no OTEL_EXPORTER_OTLP_ENDPOINT
	// means spans and metrics are made (for log correlation, propagation
	// and /metrics) but not exported over OTLP.
	Endpoint string `koanf:"endpoint"`
	// Protocol is grpc or http/protobuf (default grpc, or
	// OTEL_EXPORTER_OTLP_PROTOCOL).
	Protocol string `koanf:"protocol"`
	// Insecure sends OTLP without TLS.
	Insecure bool `koanf:"insecure"`
	// HeadersEnv names a variable holding extra OTLP headers as
	// k=v,k2=v2 (an API key): the config file holds no secret.
	HeadersEnv string `koanf:"headers_env"`
	// ServiceName is the resource's service.name (default dsh, or
	// OTEL_SERVICE_NAME).
	ServiceName string `koanf:"service_name"`
	// Sampling is the ratio of new traces recorded, 0 to 1 (default 1, or
	// OTEL_TRACES_SAMPLER_ARG). A trace started elsewhere keeps its
	// parent's decision.
	Sampling *float64 `koanf:"sampling"`
	// Content puts prompts, completions and tool arguments and results
	// on spans. Off by default: they may hold what the operator's
	// tracing backend must not see.
	Content bool `koanf:"content"`
	// MetricsInterval is how often metrics are pushed over OTLP
	// (default 60s, or OTEL_METRIC_EXPORT_INTERVAL in milliseconds).
	MetricsInterval time.Duration `koanf:"metrics_interval"`
	// Prometheus serves metrics in the Prometheus text format on dsh
	// serve: at /metrics behind the API's auth, or on its own listener.
	Prometheus PrometheusConfig `koanf:"prometheus"`
}

// PrometheusConfig is telemetry.prometheus.
type PrometheusConfig struct {
	// Enabled serves /metrics.
	Enabled bool `koanf:"enabled"`
	// Listen, when set, serves /metrics without auth on this host:port
	// instead of on the API's listener behind its auth (for a scraper
	// inside the operator's network).
	Listen string `koanf:"listen"`
}

// On reports whether the config turns telemetry on.
func (c Config) On() bool { return c.Enabled != nil && *c.Enabled }

// Validate reports the first bad setting, naming the key and the fix.
func (c Config) Validate() error {
	switch c.Protocol {
	case "", ProtocolGRPC, ProtocolHTTP:
	default:
		return invalid(fmt.Sprintf("telemetry.protocol is %q; use %q or %q", c.Protocol, ProtocolGRPC, ProtocolHTTP))
	}
	if c.Sampling != nil && (*c.Sampling < 0 || *c.Sampling > 1) {
		return invalid(fmt.Sprintf("telemetry.sampling is %v; use a ratio from 0 (no new trace recorded) to 1 (all)", *c.Sampling))
	}
	if c.MetricsInterval < 0 {
		return invalid(fmt.Sprintf("telemetry.metrics_interval is %v; use a positive duration such as 30s", c.MetricsInterval))
	}
	if c.Endpoint != "" && c.protocol() == ProtocolHTTP {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid(fmt.Sprintf("telemetry.endpoint %q is no http(s) URL; http/protobuf wants one such as http://localhost:4318", c.Endpoint))
		}
	}
	if c.Endpoint != "" && c.protocol() == ProtocolGRPC && strings.Contains(c.Endpoint, "/") && !strings.HasPrefix(c.Endpoint, "http") {
		return invalid(fmt.Sprintf("telemetry.endpoint %q is neither host:port nor a URL; grpc wants host:port such as localhost:4317", c.Endpoint))
	}
	if c.HeadersEnv != "" && strings.ContainsAny(c.HeadersEnv, "= ") {
		return invalid(fmt.Sprintf("telemetry.headers_env is %q; name a variable (OTEL_HEADERS), not its value", c.HeadersEnv))
	}
	return nil
}

func (c Config) protocol() string {
	if c.Protocol == "" {
		return ProtocolGRPC
	}
	return c.Protocol
}

func invalid(msg string) error {
	return errs.New(errs.InvalidArgument, msg).WithReason(Reason)
}

// FromEnv fills what c leaves unset from the standard OTEL_* variables in
// env (a lookup such as os.LookupEnv). The OTLP exporters read the
// remaining OTEL_EXPORTER_OTLP_* variables (headers, timeouts, TLS)
// themselves.
func (c Config) FromEnv(env func(string) (string, bool)) (Config, error) {
	get := func(k string) string {
		if env == nil {
			return ""
		}
		v, _ := env(k)
		return strings.TrimSpace(v)
	}
	if c.Enabled == nil {
		on := get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" ||
			get("OTEL_TRACES_EXPORTER") == "otlp"
		if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
			on = false
		}
		c.Enabled = &on
	}
	if c.Endpoint == "" {
		c.Endpoint = get("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if c.Protocol == "" {
		c.Protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if c.ServiceName == "" {
		c.ServiceName = get("OTEL_SERVICE_NAME")
	}
	if c.Sampling == nil {
		if v := get("OTEL_TRACES_SAMPLER_ARG"); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return c, invalid(fmt.Sprintf("OTEL_TRACES_SAMPLER_ARG is %q; use a ratio such as 0.25", v))
			}
			c.Sampling = &f
		}
		switch get("OTEL_TRACES_SAMPLER") {
		case "always_off", "parentbased_always_off":
			zero := 0.0
			c.Sampling = &zero
		case "always_on", "parentbased_always_on":
			one := 1.0
			c.Sampling = &one
		}
	}
	if c.MetricsInterval == 0 {
		if v := get("OTEL_METRIC_EXPORT_INTERVAL"); v != "" {
			ms, err := strconv.Atoi(v)
			if err != nil || ms <= 0 {
				return c, invalid(fmt.Sprintf("OTEL_METRIC_EXPORT_INTERVAL is %q; use milliseconds such as 60000", v))
			}
			c.MetricsInterval = time.Duration(ms) * time.Millisecond
		}
	}
	return c, c.Validate()
}
