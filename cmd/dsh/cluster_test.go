package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
)

// natsServer runs a JetStream server on a loopback port until the test
// ends.
func natsServer(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("the embedded NATS server did not start")
	}
	return s.ClientURL()
}

// clusterConfig is a config joining the cluster at url as hostID, with an
// agent keeping session s1.
func clusterConfig(t *testing.T, url, hostID string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	cfg := fmt.Sprintf(`plugins:
  - use: llm.scripted
    config: {replies: [{text: "stored in JetStream"}]}
agents:
  - id: main
    provider: scripted
cluster:
  nats: {url: %q}
  host_id: %s
  lease_ttl: 2s
log: {level: warn}
`, url, hostID)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestClusterSessionsAndStatus: with cluster: set, dsh run keeps its
// session in JetStream, another command lists it, and dsh cluster status
// shows who holds what.
func TestClusterSessionsAndStatus(t *testing.T) {
	url := natsServer(t)
	file := clusterConfig(t, url, "host-a")
	if out := runDsh(t, "", "--config", file, "run", "--session", "s1", "-p", "hi"); out.code != 0 || !strings.Contains(out.stdout, "stored in JetStream") {
		t.Fatalf("dsh run: %+v", out)
	}
	out := runDsh(t, "", "--config", file, "sessions", "list", "--json")
	if out.code != 0 || !strings.Contains(out.stdout, `"id":"s1"`) {
		t.Fatalf("dsh sessions list after a run in the cluster: %+v", out)
	}

	// A host holding s1 (its agent keeps it open): the lease names it.
	cfg, err := config.Load(config.LoadOptions{Path: file, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Agents[0].Session = "s1"
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	out = runDsh(t, "", "--config", file, "cluster", "status", "--json")
	if out.code != 0 {
		t.Fatalf("dsh cluster status: %+v", out)
	}
	var rep cluster.Report
	if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
		t.Fatalf("%v in %s", err, out.stdout)
	}
	leases := append([]cluster.Lease{}, rep.Orphaned...)
	for _, hs := range rep.Hosts {
		leases = append(leases, hs.Sessions...)
	}
	if len(leases) != 1 || leases[0].Session != "s1" || leases[0].HostID != "host-a" {
		t.Fatalf("the leases are %+v", leases)
	}
	text := runDsh(t, "", "--config", file, "cluster", "status")
	if text.code != 0 || !strings.Contains(text.stdout, "s1") || !strings.Contains(text.stdout, "host-a") {
		t.Fatalf("dsh cluster status as text: %+v", text)
	}
}

// TestClusterStatusExplains: no cluster: key is a usage error naming the
// fix; a server that is not there is an error naming the URL.
func TestClusterStatusExplains(t *testing.T) {
	out := runDsh(t, "", "--config", writeConfig(t, "        - text: x\n", ""), "cluster", "status")
	if out.code != exitUsage || !strings.Contains(out.stderr, "has no cluster: key") {
		t.Fatalf("without cluster: %+v", out)
	}
	file := clusterConfig(t, "nats://127.0.0.1:1", "host-a")
	out = runDsh(t, "", "--config", file, "cluster", "status")
	if out.code != exitError || !strings.Contains(out.stderr, "CLUSTER_UNREACHABLE") || !strings.Contains(out.stderr, "nats://127.0.0.1:1") {
		t.Fatalf("with no server: %+v", out)
	}
}
