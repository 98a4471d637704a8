package main

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
)

// serveMetrics says where dsh serve exposes the Prometheus metrics of
// telemetry.prometheus: the handler to mount at /metrics behind the API's
// auth, or nil when a listener of its own (telemetry.prometheus.listen)
// serves it without auth; stop ends that listener.
func serveMetrics(h *host.Host, cfg *config.Config, stderr io.Writer) (api http.Handler, stop func(stdctx.Context) error, err error) {
	stop = func(stdctx.Context) error { return nil }
	handler := h.Telemetry().PrometheusHandler()
	if handler == nil {
		return nil, stop, nil
	}
	addr := cfg.Telemetry.Prometheus.Listen
	if addr == "" {
		return handler, stop, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, stop, fmt.Errorf("cannot listen on %s for /metrics: %w; pick another address in telemetry.prometheus.listen", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", handler)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	fmt.Fprintf(stderr, "dsh serve: metrics at http://%s/metrics\n", l.Addr())
	return nil, func(ctx stdctx.Context) error {
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}, nil
}
