package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/host/config"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/spf13/cobra"
)

func clusterCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "inspect the hosts that share sessions on NATS JetStream (the cluster: key)",
	}
	var jsonOut bool
	status := &cobra.Command{
		Use:   "status",
		Short: "list the live hosts, the sessions each owns and leases left by hosts that are gone",
		Long: `Status reads the cluster's presence and lease buckets; it starts no agent
and joins nothing.

Exit codes: 0 done, 1 the NATS server cannot be reached, 2 bad usage or
config (no cluster: key).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(g.loadOptions())
			if err != nil {
				return &exitCode{code: exitUsage, err: err}
			}
			if !cfg.Cluster.Enabled() {
				return &exitCode{code: exitUsage, err: fmt.Errorf(
					"%s has no cluster: key; add cluster: {nats: {url: nats://127.0.0.1:4222}} to share sessions between hosts (see docs/cluster.md)", cfg.File)}
			}
			ctx, cancel := stdctx.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			rep, err := cluster.Status(ctx, clusterOptions(cfg))
			if err != nil {
				return &exitCode{code: exitError, err: err}
			}
			return writeClusterStatus(cmd.OutOrStdout(), rep, jsonOut)
		},
	}
	status.Flags().BoolVar(&jsonOut, "json", false, "write JSON instead of text")
	cmd.AddCommand(status)
	return cmd
}

// clusterOptions is the cluster: key as package cluster takes it; the
// credentials path is session.nats's, already resolved against the config
// file's directory.
func clusterOptions(cfg *config.Config) cluster.Options {
	c := cfg.Cluster
	o := cluster.Options{
		URL: c.NATS.URL, Stream: c.Stream, HostID: c.HostID,
		Group: c.Group, ClaimGroup: c.ClaimGroup, LeaseTTL: c.LeaseTTL, Replicas: c.Replicas,
	}
	for i := range cfg.Plugins {
		if e := &cfg.Plugins[i]; e.ID == config.ClusterEntryID {
			if nc, ok := cfg.PluginConfig(e).(*natsplugin.Config); ok {
				o.CredentialsFile, o.ConnectTimeout = nc.CredentialsFile, nc.ConnectTimeout
			}
		}
	}
	return o
}

func writeClusterStatus(w io.Writer, rep cluster.Report, jsonOut bool) error {
	if jsonOut {
		return json.NewEncoder(w).Encode(rep)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tGROUP\tMACHINE\tPID\tUP SINCE\tAPI\tSESSIONS")
	for _, h := range rep.Hosts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\n", h.HostID, orDash(h.Group), h.Hostname, h.PID,
			h.Started.Local().Format("2006-01-02 15:04:05"), orDash(h.API), len(h.Sessions))
	}
	if len(rep.Hosts) == 0 {
		fmt.Fprintln(tw, "(no live host)")
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "SESSION\tOWNER\tHOLDER\tSINCE\tRENEWED")
	n := 0
	lease := func(l cluster.Lease, owner string) {
		n++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Session, owner, l.Holder,
			l.Since.Local().Format("2006-01-02 15:04:05"), l.Renewed.Local().Format("15:04:05"))
	}
	for _, h := range rep.Hosts {
		for _, l := range h.Sessions {
			lease(l, h.HostID)
		}
	}
	for _, l := range rep.Orphaned {
		lease(l, "gone: "+orDash(l.HostID))
	}
	if n == 0 {
		fmt.Fprintln(tw, "(no session is leased)")
	}
	return tw.Flush()
}
