package nats_test

import (
	stdctx "context"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/llm/scripted"
	_ "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

// startHost starts a host whose agent "main" keeps session s1 on the
// stream of cfg, as a user's config file would say it.
func startHost(t *testing.T, url, stream string) *host.Host {
	t.Helper()
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
  - use: session.nats
    config: {url: %q, stream: %q, subject_prefix: %q, lease_ttl: 3s}
agents:
  - id: main
    provider: scripted
    session: s1
`, url, stream, "dsh.host."+stream)
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func say(t *testing.T, h *host.Host, text string) {
	t.Helper()
	a, _ := h.Agent("main")
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: text}); err != nil {
		t.Fatal(err)
	}
	a.WhenIdle(stdctx.Background())
}

// TestAHostResumesASessionFromJetStream: a host runs a turn, closes; a new
// host on the same stream resumes the session with its history, and a
// second turn adds to it.
func TestAHostResumesASessionFromJetStream(t *testing.T) {
	srv := startServer(t)
	stream := streamName()
	h := startHost(t, srv.ClientURL(), stream)
	say(t, h, "first")
	if err := h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}

	h = startHost(t, srv.ClientURL(), stream)
	defer h.Close(stdctx.Background())
	users := func() string {
		a, _ := h.Agent("main")
		var out []string
		for _, m := range a.Session().History().Messages() {
			if m.Role == llm.RoleUser {
				out = append(out, m.Content)
			}
		}
		return strings.Join(out, ",")
	}
	if got := users(); got != "first" {
		t.Fatalf("the resumed history holds the prompts %q", got)
	}
	say(t, h, "second")
	if got := users(); got != "first,second" {
		t.Fatalf("after a second turn the history holds %q", got)
	}
}
