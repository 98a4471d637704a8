package main

import (
	stdctx "context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/serve/schedule"
	"github.com/dsh-go/dsh/serve/webhook"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/jobs"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/spf13/cobra"
)

// serveCommand serves the config's agents over HTTP until SIGINT or
// SIGTERM; see docs/serve.md.
func serveCommand(g *globals) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "serve sessions over HTTP: a JSON API, live events (SSE), approvals and a web page",
		Long: `serve runs an HTTP server for the config's agents (the serve: key): open,
prompt, steer, cancel and close sessions, stream their events with
Server-Sent Events, answer tool approvals, read their history. Every /v1
route wants "Authorization: Bearer <token>", the token read from
$DSH_SERVE_TOKEN (serve.token_env names another variable; serve.token_file
a file only its owner can read). It listens on serve.listen (default
127.0.0.1:7433) and says where on stderr. SIGINT or SIGTERM shut it down
gracefully: turns may finish within serve.shutdown_timeout (default 10s),
then are cancelled, and every session is saved; it then exits 0.
The API is described at GET /openapi.json and in docs/serve.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd, g, listen) },
	}
	cmd.Flags().StringVar(&listen, "listen", "", "host:port to listen on (overrides serve.listen; port 0 picks a free one)")
	return cmd
}

func runServe(cmd *cobra.Command, g *globals, listen string) error {
	stderr := cmd.ErrOrStderr()
	opts := g.loadOptions()
	cfg, err := config.Load(opts)
	if err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	sc := &cfg.Serve
	if listen != "" {
		sc.Listen = listen
	}
	if sc.Listen == "" {
		sc.Listen = config.DefaultListen
	}
	listenHost, _, err := net.SplitHostPort(sc.Listen)
	if err != nil {
		return &exitCode{code: exitUsage, err: fmt.Errorf("listen address %q is not host:port; write e.g. 127.0.0.1:7433", sc.Listen)}
	}
	var tokens []serve.Token
	if sc.NoAuth {
		if !config.IsLoopback(listenHost) {
			return &exitCode{code: exitUsage, err: fmt.Errorf("serve.no_auth is allowed only on a loopback address, and the listen address is %q: anyone who reaches the port could run the agents' tools; set a token or listen on 127.0.0.1", sc.Listen)}
		}
	} else if tokens, err = serve.LoadTokens(*sc, os.Getenv); err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	if len(cfg.Agents) == 0 {
		return &exitCode{code: exitUsage, err: errors.New("dsh serve opens its sessions from configured agents, and the config has none; add one under the agents key")}
	}

	h, err := host.Start(cfg, host.Options{LogOutput: stderr, ApproverGrace: cfg.Serve.ApproverGraceOrDefault()})
	if err != nil {
		return &exitCode{code: exitError, err: err}
	}
	closeHost := func() error {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		return h.Close(ctx)
	}
	// log.json: true makes the API's lines JSON too; those logged with a
	// request's context carry its trace_id and span_id.
	var lh slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slogLevel(cfg.Log.Level)})
	if cfg.Log.JSON {
		lh = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slogLevel(cfg.Log.Level)})
	}
	log := slog.New(telemetry.SlogHandler(lh))
	member, err := newClusterMember(cfg, h.Sessions())
	if err != nil {
		return &exitCode{code: exitError, err: errors.Join(err, closeHost())}
	}
	// The API, webhooks and schedules deliver through the cluster's
	// service when there is one: a session another host runs is reached
	// there.
	svc := member.sessions(h.Sessions())
	un, err := startUnattended(svc, cfg, log)
	if err != nil {
		return &exitCode{code: exitError, err: errors.Join(err, member.leave(stdctx.Background()), closeHost())}
	}
	att, _ := attachments.Key.Get(h.Root())
	so := serve.Options{
		Sessions: svc, Config: cfg, Tokens: tokens, NoAuth: sc.NoAuth, Hooks: un.hooks,
		Log: log, Version: dshVersion(), Attachments: att, Jobs: jobs.Of(h.Root()),
	}
	metrics, stopMetrics, err := serveMetrics(h, cfg, stderr)
	if err != nil {
		return &exitCode{code: exitError, err: errors.Join(err, un.stop(stdctx.Background()), member.leave(stdctx.Background()), closeHost())}
	}
	so.Metrics = metrics
	srv, err := serve.New(so)
	if err != nil {
		return &exitCode{code: exitError, err: errors.Join(err, stopMetrics(stdctx.Background()), un.stop(stdctx.Background()), member.leave(stdctx.Background()), closeHost())}
	}
	l, err := net.Listen("tcp", sc.Listen)
	if err != nil {
		return &exitCode{code: exitError, err: errors.Join(fmt.Errorf("cannot listen on %s: %w; pick another address with --listen or serve.listen", sc.Listen, err), srv.Shutdown(stdctx.Background()), stopMetrics(stdctx.Background()), un.stop(stdctx.Background()), member.leave(stdctx.Background()), closeHost())}
	}
	// Joined once the port is ours: a host that cannot serve never claims
	// or adopts a session.
	if err := member.join(h, srv, l.Addr().String(), h.Logger()); err != nil {
		l.Close()
		return &exitCode{code: exitError, err: errors.Join(err, srv.Shutdown(stdctx.Background()), stopMetrics(stdctx.Background()), un.stop(stdctx.Background()), member.leave(stdctx.Background()), closeHost())}
	}
	ctx, stop := signal.NotifyContext(stdctx.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	auth, page := "bearer token required", fmt.Sprintf("http://%s/#token=<your token>", l.Addr())
	if sc.NoAuth {
		auth, page = "no token (serve.no_auth)", fmt.Sprintf("http://%s/", l.Addr())
	}
	fmt.Fprintf(stderr, "dsh serve: listening on http://%s (%s); stop with Ctrl-C\n", l.Addr(), auth)
	fmt.Fprintf(stderr, "dsh serve: the web page is at %s\n", page)
	if member != nil {
		fmt.Fprintf(stderr, "dsh serve: joined the cluster at %s as host %q\n", cfg.Cluster.NATS.URL, cfg.Cluster.HostID)
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	stop()
	fmt.Fprintln(stderr, "dsh serve: shutting down")
	timeout := sc.ShutdownTimeout
	if timeout == 0 {
		timeout = serve.DefaultShutdownTimeout
	}
	sctx, cancel := stdctx.WithTimeout(stdctx.Background(), timeout)
	defer cancel()
	// Out of the cluster first: no request forwarded here, claim or
	// adoption lands in a server that is closing; the other hosts take
	// this one's sessions when their next message comes.
	lctx, lcancel := stdctx.WithTimeout(sctx, min(timeout/4, 2*time.Second))
	failed := []error{member.leave(lctx)}
	lcancel()
	// The API and the unattended sources stop together: both refuse new
	// work at once, and the turns of each have the whole deadline to
	// finish (draining one first left the other's turns no time).
	unStopped := make(chan error, 1)
	go func() { unStopped <- un.stop(sctx) }()
	failed = append(failed, srv.Shutdown(sctx), <-unStopped)
	if serveErr == nil {
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			failed = append(failed, err)
		}
	} else if !errors.Is(serveErr, http.ErrServerClosed) {
		failed = append(failed, serveErr)
	}
	failed = append(failed, stopMetrics(sctx), closeHost())
	if err := errors.Join(failed...); err != nil {
		return &exitCode{code: exitError, err: fmt.Errorf("shutdown: %w", err)}
	}
	return nil
}

// unattended is what serves the config's webhooks and runs its schedules
// beside the API.
type unattended struct {
	// hooks serves POST /hooks/{name}; nil answers 404 there.
	hooks http.Handler
	// stop ends the schedules and waits for what they started.
	stop func(stdctx.Context) error
}

// startUnattended starts the unattended sources of cfg.Serve on the
// session service svc: the webhooks' handler (mounted at /hooks/) and
// the schedules. Its stop ends the schedules and waits for the turns both
// started, cancelling them when its ctx ends.
func startUnattended(svc sessions.Service, cfg *config.Config, log *slog.Logger) (unattended, error) {
	none := unattended{stop: func(stdctx.Context) error { return nil }}
	var hooks *webhook.Handler
	if len(cfg.Serve.Webhooks) > 0 {
		var err error
		// The spool keeps each delivery answered 202 until its outcome is
		// in a log; what a crash left there is delivered again now.
		spool := filepath.Join(cfg.ServeStateDir(), "webhooks")
		if hooks, err = webhook.New(webhook.Options{Sessions: svc, Config: cfg, Getenv: os.Getenv, Log: log, Spool: spool}); err != nil {
			return none, err
		}
		hooks.Replay()
	}
	var sched *schedule.Scheduler
	stopClaim := func() error { return nil }
	if len(cfg.Serve.Schedules) > 0 {
		claim, closeClaim, err := scheduleClaim(cfg)
		if err == nil {
			sched, err = schedule.New(schedule.Options{Sessions: svc, Config: cfg, StateDir: cfg.ServeStateDir(), Log: log, Claim: claim})
			stopClaim = closeClaim
		}
		if err != nil {
			err = errors.Join(err, stopClaim())
			if hooks != nil {
				err = errors.Join(err, hooks.Close(stdctx.Background()))
			}
			return none, err
		}
		sched.Start()
	}
	// Turns cancelled at the deadline are the documented shutdown, as
	// serve.Server.Shutdown treats the API's own: a warning, not a failure.
	cancelled := func(err error) error {
		if errors.Is(err, stdctx.DeadlineExceeded) {
			log.Warn("unattended turns still ran at the shutdown deadline; they were cancelled", "error", err)
			return nil
		}
		return err
	}
	u := unattended{stop: func(ctx stdctx.Context) error {
		var failed []error
		if sched != nil {
			failed = append(failed, cancelled(sched.Stop(ctx)), stopClaim())
		}
		if hooks != nil {
			failed = append(failed, cancelled(hooks.Close(ctx)))
		}
		return errors.Join(failed...)
	}}
	if hooks != nil {
		u.hooks = hooks
	}
	return u, nil
}
