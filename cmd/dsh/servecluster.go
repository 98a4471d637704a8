package main

import (
	stdctx "context"
	"errors"
	"fmt"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
)

// clusterMember is what `dsh serve` runs of the cluster: key — a follower
// streaming the sessions other hosts run, and the host's membership
// (presence, routing, claims, adoptions). The API is built on the member
// first; the membership joins once the API exists, so every session it
// claims or adopts is kept by the API, and it leaves before the API shuts
// down, so nothing is claimed into a server that is closing.
type clusterMember struct {
	cfg      *config.Config
	follower *cluster.Follower
	host     *cluster.Host // nil until join
}

// newClusterMember prepares the member cfg's cluster: key calls for; nil
// when it names none.
func newClusterMember(cfg *config.Config) (*clusterMember, error) {
	if !cfg.Cluster.Enabled() {
		return nil, nil
	}
	f, err := cluster.NewFollower(clusterOptions(cfg))
	if err != nil {
		return nil, err
	}
	return &clusterMember{cfg: cfg, follower: f}, nil
}

// wire gives the API the cluster's session service. Until
// cluster.Service is wired here (o.Sessions = it), the API serves the
// sessions open on this host only.
func (m *clusterMember) wire(o *serve.Options) {}

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
	return nil
}

// joined is the membership, or the error of a request that came before it.
func (m *clusterMember) joined() (*cluster.Host, error) {
	if m.host == nil {
		return nil, errs.New(cluster.NoHost, fmt.Sprintf("host %q has not joined the cluster yet; retry in a moment", m.cfg.Cluster.HostID))
	}
	return m.host, nil
}

// Prompt, Cancel and CloseSession route through the membership
// (serve.Router).
func (m *clusterMember) Prompt(ctx stdctx.Context, id string, mode sessions.Mode, r sessions.PromptRequest) (string, error) {
	c, err := m.joined()
	if err != nil {
		return "", err
	}
	return c.Prompt(ctx, id, mode, r)
}

func (m *clusterMember) Cancel(ctx stdctx.Context, id string) error {
	c, err := m.joined()
	if err != nil {
		return err
	}
	return c.Cancel(ctx, id)
}

func (m *clusterMember) CloseSession(ctx stdctx.Context, id string) error {
	c, err := m.joined()
	if err != nil {
		return err
	}
	return c.CloseSession(ctx, id)
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
