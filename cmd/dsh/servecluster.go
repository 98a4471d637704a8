package main

import (
	stdctx "context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
)

// clusterMember is what `dsh serve` runs of the cluster: key — the host's
// membership (presence, routing, claims) and a follower streaming the
// sessions other hosts run. The membership joins before the API exists,
// so the API's part in a claim goes through srv, set once it does.
type clusterMember struct {
	host     *cluster.Host
	follower *cluster.Follower
	srv      atomic.Pointer[serve.Server]
}

// joinCluster joins h to the cluster cfg names; nil when it names none.
func joinCluster(h *host.Host, cfg *config.Config, api string, log hclog.Logger) (*clusterMember, error) {
	if !cfg.Cluster.Enabled() {
		return nil, nil
	}
	m := &clusterMember{}
	o := clusterOptions(cfg)
	o.Sessions, o.API, o.Logger = h.Sessions(), api, log
	o.Open = func(id string) sessions.OpenOptions {
		if srv := m.srv.Load(); srv != nil {
			return srv.ClaimOptions(id)
		}
		agent, _ := cfg.ServeAgent("")
		return sessions.OpenOptions{Agent: agent, SessionID: id, Presets: cfg.Serve.Presets}
	}
	o.Claimed = func(ss *sessions.Session) error {
		srv := m.srv.Load()
		if srv == nil {
			return errs.New(cluster.NoHost, fmt.Sprintf("host %q is still starting its API and cannot keep session %q yet; retry in a moment", o.HostID, ss.ID()))
		}
		return srv.Adopt(ss)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), o.LeaseTTL+o.ConnectTimeout)
	defer cancel()
	var err error
	if m.host, err = cluster.Join(ctx, o); err != nil {
		return nil, err
	}
	if m.follower, err = cluster.NewFollower(o); err != nil {
		return nil, errors.Join(err, m.host.Close(stdctx.Background()))
	}
	return m, nil
}

// wire gives the API the cluster's router and follower.
func (m *clusterMember) wire(o *serve.Options) {
	if m == nil {
		return
	}
	o.Router, o.Remote = m, m.follower
}

// started lets claims adopt their sessions into srv.
func (m *clusterMember) started(srv *serve.Server) {
	if m != nil {
		m.srv.Store(srv)
	}
}

// Prompt and Cancel route through the membership (serve.Router).
func (m *clusterMember) Prompt(ctx stdctx.Context, id string, mode agentcontroller.Mode, r sessions.PromptRequest) (string, error) {
	return m.host.Prompt(ctx, id, mode, r)
}

func (m *clusterMember) Cancel(ctx stdctx.Context, id string) error { return m.host.Cancel(ctx, id) }

// leave stops following and leaves the cluster: requests in flight are
// answered within ctx, then the presence entry goes.
func (m *clusterMember) leave(ctx stdctx.Context) error {
	if m == nil {
		return nil
	}
	return errors.Join(m.follower.Close(), m.host.Close(ctx))
}
