package config

import (
	"fmt"
	"net"
	"os"

	"github.com/dsh-go/dsh/telemetry"
)

// checkTelemetry reports the telemetry: key's mistakes.
func (c *Config) checkTelemetry(p *problems) {
	if err := c.Telemetry.Validate(); err != nil {
		p.add("telemetry", err.Error())
	}
	if l := c.Telemetry.Prometheus.Listen; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			p.add("telemetry.prometheus.listen", fmt.Sprintf("%q is not host:port; write one such as 127.0.0.1:9464", l))
		}
	}
}

// TelemetryConfig is the telemetry: block completed from the OTEL_*
// variables of the environment the config was loaded with (none when
// ignore_environment is set).
func (c *Config) TelemetryConfig() (telemetry.Config, error) {
	if c.IgnoreEnvironment {
		return c.Telemetry.FromEnv(nil)
	}
	env := c.environ
	if env == nil {
		return c.Telemetry.FromEnv(os.LookupEnv)
	}
	return c.Telemetry.FromEnv(func(k string) (string, bool) {
		v := lookupEnv(env, k)
		return v, v != ""
	})
}
