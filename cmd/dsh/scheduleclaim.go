package main

import (
	stdctx "context"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/host/config"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/serve/schedule"
)

// scheduleClaim is how the schedules of a host in a cluster claim each
// scheduled time, so one host runs it; nil outside a cluster (every run
// runs here). Its close ends the claims' connection, once the schedules
// stopped.
func scheduleClaim(cfg *config.Config) (schedule.ClaimFunc, func() error, error) {
	if !cfg.Cluster.Enabled() {
		return nil, func() error { return nil }, nil
	}
	o := clusterOptions(cfg)
	// Room for the bucket's create-or-bind retries of hosts started
	// together on a fresh cluster.
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), natsplugin.SetUpPatience+o.ConnectTimeout)
	defer cancel()
	f, err := cluster.OpenFires(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	return f.Claim, f.Close, nil
}
