package main

import (
	stdctx "context"
	"errors"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
)

// clusterMember is what `dsh serve` runs of the cluster: key — a follower
// streaming the sessions other hosts run, the host's membership
// (presence, routing, claims, adoptions) and the session service over
// both. The API, webhooks and schedules are built on the member first;
// the membership joins once the API exists, so every session it claims or
// adopts is kept by the API, and it leaves before the API shuts down, so
// nothing is claimed into a server that is closing.
type clusterMember struct {
	cfg      *config.Config
	follower *cluster.Follower
	// svc routes every session call to the host that runs the session;
	// it answers NoHost until join binds it.
	svc  *cluster.Service
	host *cluster.Host // nil until join
}

// newClusterMember prepares the member cfg's cluster: key calls for over
// the host's controller local; nil when it names none.
func newClusterMember(cfg *config.Config, local *sessions.Controller) (*clusterMember, error) {
	if !cfg.Cluster.Enabled() {
		return nil, nil
	}
	f, err := cluster.NewFollower(clusterOptions(cfg))
	if err != nil {
		return nil, err
	}
	return &clusterMember{cfg: cfg, follower: f, svc: cluster.NewService(local, f)}, nil
}

// sessions is the session service entry points deliver through: the
// cluster's when one is configured, so a webhook or a schedule reaches a
// session wherever it runs; else local.
func (m *clusterMember) sessions(local *sessions.Controller) sessions.Service {
	if m == nil {
		return local
	}
	return m.svc
}

// join joins h to the cluster, claiming and adopting sessions into srv.
func (m *clusterMember) join(h *host.Host, srv *serve.Server, api string, log hclog.Logger) error {
	if m == nil {
		return nil
	}
	o := clusterOptions(m.cfg)
	o.Sessions, o.API, o.Logger = h.Sessions(), api, log
	o.Open = srv.ClaimOptions
	o.Claimed = func(ss *sessions.Session) error { return srv.Adopt(ss.ID()) }
	o.CloseLocal = func(ctx stdctx.Context, ss *sessions.Session) error {
		srv.Release(ss.ID())
		return ss.Close(ctx)
	}
	// Room for the buckets' create-or-bind retries of hosts started
	// together on a fresh cluster, and for an old presence to expire.
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), natsplugin.SetUpPatience+o.LeaseTTL+o.ConnectTimeout)
	defer cancel()
	c, err := cluster.Join(ctx, o)
	if err != nil {
		return err
	}
	m.host = c
	m.svc.Bind(c)
	return nil
}

// leave leaves the cluster — requests forwarded here are answered within
// ctx, then no more come and nothing more is adopted — and stops
// following.
func (m *clusterMember) leave(ctx stdctx.Context) error {
	if m == nil {
		return nil
	}
	var err error
	if m.host != nil {
		err = m.host.Close(ctx)
	}
	return errors.Join(err, m.follower.Close())
}
