// Command otelcol is a minimal OpenTelemetry Collector for dsh's telemetry
// tests: the upstream OTLP receiver (gRPC and HTTP) and the contrib file
// exporter, assembled with the collector's own Go API (no builder tool).
//
// It is a module of its own because the collector needs newer
// OpenTelemetry modules than the ones dsh pins. The collector's own
// telemetry is cut down to warnings on stderr: its standard telemetry
// factory (otelconftelemetry) adds some 44 modules to the build for
// internal metrics and traces no test reads.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry"
	"go.uber.org/zap"
)

func components() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory()); err != nil {
		return f, err
	}
	f.Telemetry = telemetry.NewFactory(
		func() component.Config { return &struct{}{} },
		telemetry.WithCreateLogger(stderrLogger),
	)
	return f, nil
}

// stderrLogger logs warnings and errors, so that a test that cannot find
// its spans can show why the collector dropped them.
func stderrLogger(_ context.Context, set telemetry.LoggerSettings, _ component.Config) (*zap.Logger, component.ShutdownFunc, error) {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	cfg.Encoding = "console"
	cfg.Sampling = nil
	build := cfg.Build
	if set.BuildZapLogger != nil {
		build = func(opts ...zap.Option) (*zap.Logger, error) { return set.BuildZapLogger(cfg, opts...) }
	}
	l, err := build()
	if err != nil {
		return nil, nil, err
	}
	return l, func(context.Context) error { _ = l.Sync(); return nil }, nil
}

func main() {
	cmd := otelcol.NewCommand(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "dsh test collector", Version: "test"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
