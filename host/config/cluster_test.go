package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host/config"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
)

func TestClusterConfigProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"no url", "cluster:\n  host_id: a\n", []string{"config.yaml:7: cluster.nats.url: the cluster: key has no nats.url"}},
		{"bad tokens", "cluster:\n  nats: {url: nats://x:4222}\n  host_id: a.b\n  group: \"g h\"\n  stream: \"s>\"\n",
			[]string{`cluster.host_id: "a.b" cannot name a NATS subject token`, `cluster.group: "g h"`, `cluster.stream: "s>"`}},
		{"ttl and replicas", "cluster:\n  nats: {url: nats://x:4222}\n  lease_ttl: 100ms\n  replicas: 2\n",
			[]string{"cluster.lease_ttl: lease_ttl is 100ms; use at least 1s", "cluster.replicas: replicas is 2"}},
		{"a second store", "cluster:\n  nats: {url: nats://x:4222}\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := serveBase
			if tc.want == nil {
				base = strings.Replace(serveBase, "  - use: llm.scripted\n", "  - use: llm.scripted\n  - use: session.jsonl\n", 1)
				tc.want = []string{"plugins[1]: a cluster keeps its sessions in JetStream", "remove this session.jsonl entry"}
			}
			_, err := config.Parse("config.yaml", []byte(base+tc.yaml), config.LoadOptions{Environ: []string{}})
			if err == nil {
				t.Fatal("the config was accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestClusterConfigMountsSessionNATS: cluster: becomes one session.nats
// entry carrying the connection, the host id and the lease TTL, with the
// defaults filled in; without cluster: nothing is added.
func TestClusterConfigMountsSessionNATS(t *testing.T) {
	cfg, err := config.Parse("/etc/dsh/config.yaml", []byte(serveBase+`
cluster:
  nats: {url: "nats://a:4222,nats://b:4222", credentials_file: host.creds}
  host_id: host-a
  lease_ttl: 10s
`), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	e := entry(cfg, config.ClusterEntryID)
	if e == nil {
		t.Fatalf("no entry %q among %+v", config.ClusterEntryID, cfg.Plugins)
	}
	nc, ok := cfg.PluginConfig(e).(*natsplugin.Config)
	if !ok {
		t.Fatalf("the entry's config is %T", cfg.PluginConfig(e))
	}
	want := natsplugin.Config{}.Defaults()
	want.URL, want.HostID, want.LeaseTTL = "nats://a:4222,nats://b:4222", "host-a", 10*time.Second
	want.CredentialsFile = filepath.Join("/etc/dsh", "host.creds")
	if *nc != want {
		t.Fatalf("session.nats gets %+v, want %+v", *nc, want)
	}
	if cfg.Cluster.Stream != config.DefaultClusterStream || cfg.Cluster.Replicas != 1 {
		t.Fatalf("defaults not filled: %+v", cfg.Cluster)
	}

	alone, err := config.Parse("config.yaml", []byte(serveBase), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if entry(alone, config.ClusterEntryID) != nil || alone.Cluster.Enabled() {
		t.Fatal("a config without cluster: joined one")
	}
}

// TestClusterHostIDDefaultsToTheHostname: a host id is always set, and
// always a subject token, whatever the machine is called.
func TestClusterHostIDDefaultsToTheHostname(t *testing.T) {
	cfg, err := config.Parse("config.yaml", []byte(serveBase+"cluster:\n  nats: {url: nats://x:4222}\n"), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if id := cfg.Cluster.HostID; id == "" || strings.ContainsAny(id, ". *>") {
		t.Fatalf("the default host id is %q", id)
	}
}

func entry(cfg *config.Config, id string) *config.Entry {
	for i := range cfg.Plugins {
		if cfg.Plugins[i].ID == id {
			return &cfg.Plugins[i]
		}
	}
	return nil
}

// TestClusterHostIDFromTheEnvironment: one config file serves every host
// of a cluster; each sets its own id with DSH_CLUSTER__HOST_ID.
func TestClusterHostIDFromTheEnvironment(t *testing.T) {
	cfg, err := config.Parse("config.yaml", []byte(serveBase+"cluster:\n  nats: {url: nats://x:4222}\n"),
		config.LoadOptions{Environ: []string{"DSH_CLUSTER__HOST_ID=host-b"}})
	if err != nil {
		t.Fatal(err)
	}
	nc := cfg.PluginConfig(entry(cfg, config.ClusterEntryID)).(*natsplugin.Config)
	if cfg.Cluster.HostID != "host-b" || nc.HostID != "host-b" {
		t.Fatalf("host id %q, session.nats's %q", cfg.Cluster.HostID, nc.HostID)
	}
}
