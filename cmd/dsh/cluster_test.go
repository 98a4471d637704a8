package main

import (
	"bufio"
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/hashicorp/go-hclog"
)

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
	url := natstest.Single(t).ClientURL()
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
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
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

// TestClusterOfServeHostsSurvivesAKill runs three dsh serve processes on
// a 3-node NATS cluster, the session logs kept by all three nodes. A
// prompt sent to host b for a session host a runs passes a's admission and
// is answered; a client streaming from b sees a's events; a retry through
// b is not delivered twice. Then host a is killed mid-turn: once its lease
// runs out, b or c resumes the session — the completed turn intact, the
// interrupted one closed, nothing doubled — and b's client sees the events
// continue, without waiting for a message to claim the session.
func TestClusterOfServeHostsSurvivesAKill(t *testing.T) {
	nc := natstest.Start(t, 3)
	token := "cluster-token-5e1d"
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      delay: 20ms
      replies:
        - text: "answer one"
        - text: "%s"
agents:
  - id: main
    provider: scripted
cluster:
  nats: {url: %q}
  lease_ttl: 2s
  replicas: 3
log: {level: warn}
`, strings.Repeat("slow ", 400), nc.URLs())), 0o644)
	a := startServe(t, path, "DSH_SERVE_TOKEN="+token, "DSH_CLUSTER__HOST_ID=a")
	b := startServe(t, path, "DSH_SERVE_TOKEN="+token, "DSH_CLUSTER__HOST_ID=b")
	startServe(t, path, "DSH_SERVE_TOKEN="+token, "DSH_CLUSTER__HOST_ID=c")
	call := func(base, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	if code, out := call(a.base, "POST", "/v1/sessions", `{"session_id":"s1"}`); code != 201 {
		t.Fatalf("open on a: %d %s", code, out)
	}

	// A client of host b follows the session host a runs.
	req, _ := http.NewRequest("GET", b.base+"/v1/sessions/s1/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	await := func(what string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("b's stream ended before %q", what)
				}
				if strings.HasPrefix(l, "data: ") && strings.Contains(l, what) {
					return
				}
			case <-deadline:
				t.Fatalf("b's stream never carried %q\na:\n%s\nb:\n%s", what, a.log.String(), b.log.String())
			}
		}
	}

	code, first := call(b.base, "POST", "/v1/sessions/s1/messages", `{"request_id":"r1","content":"hello through b"}`)
	if code != 202 {
		t.Fatalf("a message through b: %d %s", code, first)
	}
	await("answer one")
	if code, again := call(b.base, "POST", "/v1/sessions/s1/messages", `{"request_id":"r1","content":"hello through b"}`); code != 202 || again != first {
		t.Fatalf("a retry through b: %d %s, first %s", code, again, first)
	}
	out := runDsh(t, "", "--config", path, "cluster", "status", "--json")
	var rep cluster.Report
	if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil || len(rep.Hosts) != 3 {
		t.Fatalf("cluster status: %v %+v", err, out)
	}
	if hs := rep.Hosts[0]; hs.HostID != "a" || len(hs.Sessions) != 1 || hs.Sessions[0].Session != "s1" {
		t.Fatalf("host a in the status: %+v", hs)
	}

	// Mid-turn, host a dies.
	if code, out := call(b.base, "POST", "/v1/sessions/s1/messages", `{"request_id":"r2","content":"talk slowly"}`); code != 202 {
		t.Fatalf("a second message: %d %s", code, out)
	}
	await("talk slowly")
	a.cmd.Process.Kill()
	a.cmd.Wait()

	// No message needed: b sees the lease run out and resumes the session,
	// closing the interrupted turn, which its client sees.
	await(`"reason":"interrupted"`)
	if code, out := call(b.base, "POST", "/v1/sessions/s1/messages", `{"request_id":"r3","content":"after the kill"}`); code != 202 {
		t.Fatalf("a message after the kill: %d %s\nb:\n%s", code, out, b.log.String())
	}
	await("after the kill")
	await("answer one")

	code, body := call(b.base, "GET", "/v1/sessions/s1/events", "")
	if code != 200 {
		t.Fatalf("events: %d %s", code, body)
	}
	var page struct {
		Events []struct {
			Seq       int64
			Type      string
			Turn      int
			Reason    string
			RequestID string `json:"request_id"`
		}
	}
	json.Unmarshal([]byte(body), &page)
	requests := map[string]int{}
	ends := map[int]string{}
	for i, e := range page.Events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: %s", i, e.Seq, body)
		}
		if e.RequestID != "" {
			requests[e.RequestID]++
		}
		if e.Type == "turn/end" {
			ends[e.Turn] = e.Reason
		}
	}
	if requests["r1"] != 1 || requests["r2"] != 1 || requests["r3"] != 1 {
		t.Fatalf("request ids in the log: %v\n%s", requests, body)
	}
	if ends[1] != "completed" || ends[2] != "interrupted" {
		t.Fatalf("the turns ended %v\n%s", ends, body)
	}
}

// TestClusterOptionsCarryTheWholeKey: what the cluster: key says reaches
// the membership, replicas included (the presence bucket is kept by as
// many servers as the session logs).
func TestClusterOptionsCarryTheWholeKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte(`plugins:
  - use: llm.scripted
    config: {replies: [{text: "x"}]}
agents:
  - id: main
    provider: scripted
cluster:
  nats: {url: "nats://127.0.0.1:4222", credentials_file: a.creds}
  host_id: a
  group: g
  claim_group: g
  lease_ttl: 7s
  replicas: 3
  stream: S
`), 0o644)
	cfg, err := config.Load(config.LoadOptions{Path: path, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	o := clusterOptions(cfg)
	if o.URL != "nats://127.0.0.1:4222" || o.CredentialsFile != filepath.Join(filepath.Dir(path), "a.creds") || o.HostID != "a" ||
		o.Group != "g" || o.ClaimGroup != "g" || o.LeaseTTL != 7*time.Second || o.Replicas != 3 || o.Stream != "S" {
		t.Fatalf("clusterOptions = %+v", o)
	}
}
