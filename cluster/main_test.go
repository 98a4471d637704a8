package cluster_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/plugin"
	_ "github.com/dsh-go/dsh/plugins/llm/scripted"
	_ "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
)

// Every server, host and connection is closed by the test that made it, so
// no goroutine is ignored; natstest gives a server's background loops the
// time they take to end after its shutdown.
func TestMain(m *testing.M) { natstest.VerifyTestMain(m) }

// patience bounds every wait of the tests.
const patience = 20 * time.Second

// leaseTTL is short so a test that needs a lease to expire does not wait
// long; hosts renew every third of it.
const leaseTTL = 3 * time.Second

// refuseReason is what the test admission plugin refuses with.
const refuseReason = "clustertest/refused"

// refuseConfig: the clustertest.refuse plugin refuses every message that
// contains Word, naming Host in its refusal.
type refuseConfig struct {
	Word string `koanf:"word" json:"word"`
	Host string `koanf:"host" json:"host"`
	// Slow messages, those holding "slow", are held this long first.
	Hold time.Duration `koanf:"hold" json:"hold"`
}

func init() {
	plugin.Register("clustertest.refuse", "refuses messages holding a word (tests only)", func(ctx *dshctx.Context, cfg refuseConfig) error {
		_, err := agentcontroller.EventAdmission.On(ctx, func(c stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			if strings.Contains(a.Message.Content, "slow") {
				select {
				case <-time.After(cfg.Hold):
				case <-c.Done():
					return agentcontroller.Decision{}, c.Err()
				}
			}
			if cfg.Word != "" && strings.Contains(a.Message.Content, cfg.Word) {
				return agentcontroller.Reject(refuseReason, fmt.Sprintf("host %s does not take messages saying %q", cfg.Host, cfg.Word), true), nil
			}
			return next.Call(c, a)
		})
		return err
	})
}

// startServer runs a JetStream server until the test ends; maxPayload 0
// keeps the server's default.
func startServer(t *testing.T, maxPayload int32) *server.Server {
	return natstest.SingleWith(t, func(o *server.Options) { o.MaxPayload = maxPayload })
}

var streams atomic.Int64

// streamName is a stream no other test of the run uses.
func streamName() string { return fmt.Sprintf("C%d", streams.Add(1)) }

// node is one dsh host of a test cluster: the host started from YAML with
// session.nats on the cluster's stream, and its membership.
type node struct {
	id  string
	h   *host.Host
	cfg *config.Config
	c   *cluster.Host
	// api is the host's HTTP API, once a test serves it (see api).
	api *serve.Server
}

type nodeOpts struct {
	group, claimGroup string
	// refuse makes the host's admission refuse messages holding it.
	refuse string
	// hold makes it hold messages holding "slow" that long.
	hold time.Duration
	// delay is the scripted model's delay per chunk: a long one keeps a
	// turn running.
	delay time.Duration
	// noOpen leaves Options.Open nil: the host claims nothing.
	noOpen bool
	// replicas is session.nats's (0: its default, 1).
	replicas int
	// claimed is Options.Claimed.
	claimed func(*sessions.Session) error
	// lookup makes Options.Open look the session up in the store by its
	// id first, as serve's ClaimOptions does.
	lookup bool
	// plugins are more YAML plugin entries; tail is YAML after the
	// agents list (more agents, a serve: key).
	plugins, tail string
}

// startNode starts host id on the server's stream and joins it to the
// cluster; both are closed when the test ends.
func startNode(t *testing.T, srv *server.Server, stream, id string, o nodeOpts) *node {
	t.Helper()
	llmCfg, _ := json.Marshal(map[string]any{"delay": o.delay.String()})
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
    config: %s
  - use: session.nats
    config: {url: %q, stream: %q, subject_prefix: %q, lease_ttl: %s, host_id: %q, replicas: %d}
`, llmCfg, srv.ClientURL(), stream, "dsh.t."+stream, leaseTTL, id, max(o.replicas, 1))
	if o.refuse != "" || o.hold > 0 {
		yaml += fmt.Sprintf("  - use: clustertest.refuse\n    config: {word: %q, host: %q, hold: %s}\n", o.refuse, id, o.hold)
	}
	yaml += o.plugins
	yaml += "agents:\n  - id: main\n    provider: scripted\n" + o.tail
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{id: id, h: h, cfg: cfg}
	t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), patience)
		defer cancel()
		if n.c != nil {
			if err := n.c.Close(ctx); err != nil {
				t.Errorf("closing the membership of host %s: %v", id, err)
			}
		}
		if err := h.Close(ctx); err != nil {
			t.Errorf("closing host %s: %v", id, err)
		}
	})
	opts := clusterOptions(srv, stream, id, h)
	opts.Group, opts.ClaimGroup = o.group, o.claimGroup
	if o.noOpen {
		opts.Open = nil
	}
	opts.Claimed = o.claimed
	if o.lookup {
		opts.Open = func(id string) sessions.OpenOptions {
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
			defer cancel()
			h.Sessions().Find(ctx, id)
			return sessions.OpenOptions{Agent: "main"}
		}
	}
	if n.c, err = cluster.Join(stdctx.Background(), opts); err != nil {
		t.Fatal(err)
	}
	return n
}

func clusterOptions(srv *server.Server, stream, id string, h *host.Host) cluster.Options {
	return cluster.Options{
		URL: srv.ClientURL(), Stream: stream, SubjectPrefix: "dsh.t." + stream, HostID: id, LeaseTTL: leaseTTL,
		Sessions:       h.Sessions(),
		Open:           func(string) sessions.OpenOptions { return sessions.OpenOptions{Agent: "main"} },
		RequestTimeout: time.Second,
	}
}

// open opens session id on n, as `dsh serve` would.
func (n *node) open(t *testing.T, id string) *sessions.Session {
	t.Helper()
	ss, err := n.h.Sessions().Open(stdctx.Background(), sessions.OpenOptions{Agent: "main", SessionID: id, KeepRunning: true})
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// session returns session id open on n, failing the test when it is not.
func (n *node) session(t *testing.T, id string) *sessions.Session {
	t.Helper()
	ss, ok := n.h.Sessions().Get(id)
	if !ok {
		t.Fatalf("session %q is not open on host %s", id, n.id)
	}
	return ss
}

// events returns the log of session id open on n, read through n's
// session service.
func (n *node) events(t *testing.T, id string) []session.Event {
	t.Helper()
	n.session(t, id)
	evs, err := n.h.Sessions().History(ctxT(t), id, 0)
	if err != nil {
		t.Fatalf("the history of session %q on host %s: %v", id, n.id, err)
	}
	return evs
}

// history returns the conversation the log of session id open on n
// gives its model.
func (n *node) history(t *testing.T, id string) llm.History {
	t.Helper()
	h, err := session.Replay(n.events(t, id))
	if err != nil {
		t.Fatalf("replaying the log of session %q on host %s: %v", id, n.id, err)
	}
	return h
}

// running says a turn of session id runs on n.
func (n *node) running(t *testing.T, id string) bool {
	t.Helper()
	in, err := n.h.Sessions().Info(ctxT(t), id)
	if err != nil {
		t.Fatalf("session %q on host %s: %v", id, n.id, err)
	}
	return in.Running
}

// prompts returns the user messages of the session open on n, once it is
// idle.
func (n *node) prompts(t *testing.T, id string) []string {
	t.Helper()
	n.session(t, id)
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), patience)
	defer cancel()
	if err := n.h.Sessions().Idle(ctx, id); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range n.history(t, id).Messages() {
		if m.Role == llm.RoleUser {
			out = append(out, m.Content)
		}
	}
	return out
}

// eventually polls cond until it holds or patience runs out.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", patience, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ctxT(t *testing.T) stdctx.Context {
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}
