package cluster_test

import (
	"bytes"
	stdctx "context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/dsh-go/dsh/cluster"
	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/serve/schedule"
	"github.com/dsh-go/dsh/serve/webhook"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/nats-io/nats-server/v2/server"
)

func init() {
	// clustertest.ask registers "ask", a tool whose every call asks for
	// approval.
	plugin.Register("clustertest.ask", "a tool that asks for approval (tests only)", func(ctx *dshctx.Context, _ struct{}) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, tools.Tool{
			Name: "ask", Description: "asks first", Parameters: json.RawMessage(`{"type":"object"}`), Approval: tools.Ask,
			Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
				return tools.Result{Content: "the asked tool ran"}, nil
			},
		})
	}, tools.Key)
}

// hookSecret signs the test webhook's deliveries.
const hookSecret = "cluster-test-secret"

// serviceOpts add an agent whose model calls the asking tool once, a
// webhook and a schedule, both delivering to sessions host a runs.
var serviceOpts = nodeOpts{
	replicas: 3,
	plugins: `  - id: asking
    use: llm.scripted
    config: {name: asking, replies: [{tool_calls: [{name: ask}]}, {text: done}]}
  - use: clustertest.ask
`,
	tail: `  - id: asker
    provider: asking
serve:
  webhooks:
    push:
      secret_env: PUSH_SECRET
      session: hook-s
      prompt: "pushed {{.Raw}}"
  schedules:
    - {name: tick, cron: "@every 1s", session: sched-s, prompt: "tick"}
`,
}

// svcNode is a host with its cluster Service.
type svcNode struct {
	*node
	svc *cluster.Service
}

// serviceNode starts host id on srv and its Service, which streams with
// a Follower of its own.
func serviceNode(t *testing.T, srv *server.Server, stream, id string, o nodeOpts) *svcNode {
	t.Helper()
	n := startNode(t, srv, stream, id, o)
	f, err := cluster.NewFollower(cluster.Options{URL: srv.ClientURL(), Stream: stream, SubjectPrefix: "dsh.t." + stream})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	svc := cluster.NewService(n.h.Sessions(), f)
	svc.Bind(n.c)
	return &svcNode{node: n, svc: svc}
}

// TestTheServiceServesASessionOwnedByAnotherHost: on a 3-node JetStream
// cluster (the embedded servers of natstest.Start), host a runs the
// sessions and host b reaches them only through its cluster Service.
func TestTheServiceServesASessionOwnedByAnotherHost(t *testing.T) {
	c := natstest.Start(t, 3)
	stream := streamName()
	a := serviceNode(t, c.Node(0), stream, "a", serviceOpts)
	b := serviceNode(t, c.Node(2), stream, "b", serviceOpts)
	// ensure opens id on a through a's Service.
	ensure := func(t *testing.T, id, agent string) {
		t.Helper()
		in, err := a.svc.Ensure(ctxT(t), sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: agent, SessionID: id}})
		if err != nil || in.How != sessions.HowCreated {
			t.Fatalf("opening %s on host a: %+v, %v", id, in, err)
		}
	}
	// notOnB fails the test when b opened id.
	notOnB := func(t *testing.T, id string) {
		t.Helper()
		if _, open := b.h.Sessions().Get(id); open {
			t.Fatalf("host b opened session %s, which host a runs", id)
		}
	}

	t.Run("webhook", func(t *testing.T) {
		ensure(t, "hook-s", "main")
		hooks, err := webhook.New(webhook.Options{Sessions: b.svc, Config: b.cfg, Getenv: func(string) string { return hookSecret }})
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"ref":"main"}`)
		mac := hmac.New(sha256.New, []byte(hookSecret))
		mac.Write(body)
		req := httptest.NewRequest(http.MethodPost, "/hooks/push", bytes.NewReader(body))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		rec := httptest.NewRecorder()
		hooks.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			t.Fatalf("host b's webhook answered %d %s", rec.Code, rec.Body)
		}
		// Close waits for the delivery's turn, through the Service.
		if err := hooks.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if got := a.prompts(t, "hook-s"); !slices.Equal(got, []string{`pushed {"ref":"main"}`}) {
			t.Fatalf("host a's session holds the prompts %q", got)
		}
		notOnB(t, "hook-s")
	})

	t.Run("schedule", func(t *testing.T) {
		ensure(t, "sched-s", "main")
		sched, err := schedule.New(schedule.Options{Sessions: b.svc, Config: b.cfg, StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		sched.Start()
		ss := a.session(t, "sched-s")
		eventually(t, "a scheduled run in host a's session", func() bool { return ss.Log().History().Len() >= 2 })
		if err := sched.Stop(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if got := a.prompts(t, "sched-s"); len(got) == 0 || got[0] != "tick" {
			t.Fatalf("host a's session holds the prompts %q", got)
		}
		notOnB(t, "sched-s")
	})

	t.Run("approval", func(t *testing.T) {
		ensure(t, "ask-s", "asker")
		st, err := b.svc.Attach(ctxT(t), "ask-s", sessions.AttachOptions{Approvals: true, Name: "on-b"})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		// A client on the owner answers approvals too: the first answer
		// wins, and it is told who gave it.
		onA, err := a.svc.Attach(ctxT(t), "ask-s", sessions.AttachOptions{Approvals: true, Name: "on-a", FromEnd: true})
		if err != nil {
			t.Fatal(err)
		}
		defer onA.Close()
		turn, err := b.svc.Prompt(ctxT(t), "ask-s", sessions.PromptRequest{Content: "use the tool"})
		if err != nil {
			t.Fatal(err)
		}
		var results []string
		for answered := false; ; {
			u, err := st.Next(ctxT(t))
			if err != nil {
				t.Fatalf("host b's stream, answered %v: %v", answered, err)
			}
			switch {
			case u.Kind == live.KindQuestion && !answered:
				if u.Question.Request.Tool != "ask" {
					t.Fatalf("host b was asked %+v", u.Question)
				}
				if err := st.Answer(u.Question.ID, approval.Answer{Choice: approval.AllowOnce}); err != nil {
					t.Fatal(err)
				}
				answered = true
			case u.Kind == live.KindEvent && u.Event.Type == session.ToolResult:
				results = append(results, u.Event.Message.Content)
			}
			if u.Kind == live.KindEvent && u.Event.Type == session.TurnEnd {
				break
			}
		}
		if !slices.Equal(results, []string{"the asked tool ran"}) {
			t.Fatalf("host b's stream saw the tool results %q", results)
		}
		r, err := turn.Wait(ctxT(t))
		if err != nil || !r.Ran() || r.Outcome != sessions.FateDelivered {
			t.Fatalf("waiting for the turn: %+v, %v", r, err)
		}
		for {
			u, err := onA.Next(ctxT(t))
			if err != nil {
				t.Fatalf("the stream on host a: %v", err)
			}
			if u.Kind == live.KindSettled {
				if u.Settled.AnsweredBy != "on-b" || u.Settled.Answer.Choice != approval.AllowOnce {
					t.Fatalf("host a's client was told %+v", u.Settled)
				}
				break
			}
		}
		if st.LastSeq() < r.End.Seq {
			t.Fatalf("the stream's last seq is %d, the turn ended at %d", st.LastSeq(), r.End.Seq)
		}
		notOnB(t, "ask-s")
	})

	t.Run("a relayed stream ends with the session", func(t *testing.T) {
		ensure(t, "rel-s", "asker")
		st, err := b.svc.Attach(ctxT(t), "rel-s", sessions.AttachOptions{Approvals: true, Name: "on-b"})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		watcher, err := b.svc.Attach(ctxT(t), "rel-s", sessions.AttachOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer watcher.Close()
		if err := watcher.Answer(1, approval.Answer{Choice: approval.Deny}); !errs.HasCode(err, live.NotApprover) {
			t.Fatalf("answering through a stream attached without approvals: %v", err)
		}
		if err := b.svc.Close(ctxT(t), "rel-s"); err != nil {
			t.Fatal(err)
		}
		for {
			_, err := st.Next(ctxT(t))
			if errs.HasCode(err, live.HubClosed) {
				break
			}
			if err != nil {
				t.Fatalf("host b's stream of a session closed on a ended with %v", err)
			}
		}
		if err := st.Answer(1, approval.Answer{Choice: approval.Deny}); !errs.HasCode(err, live.Detached) {
			t.Fatalf("answering through the relay of a closed session: %v", err)
		}
	})

	t.Run("resume", func(t *testing.T) {
		persist(t, a.node, "res-s")
		opts := sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "res-s"}}
		// resumes ensures res-s through from, then through the other host,
		// which joins it where it runs: one copy, the one its lease names.
		resumes := func(t *testing.T, from, other *svcNode) {
			t.Helper()
			in, err := from.svc.Ensure(ctxT(t), opts)
			if err != nil || in.How != sessions.HowResumed || in.LastSeq == 0 {
				t.Fatalf("ensuring a stored session nobody runs through host %s: %+v, %v", from.id, in, err)
			}
			// from resumes it, or, when it read the lease before its
			// release reached its server, the host that last ran it does.
			runs := from
			if _, there := other.h.Sessions().Get("res-s"); there {
				runs = other
			}
			runs.session(t, "res-s")
			if got := owner(t, leases(t, c.Node(1), stream), "res-s"); got != runs.id {
				t.Fatalf("res-s runs on %s, its lease names %q", runs.id, got)
			}
			for _, n := range []*svcNode{a, b} {
				in, err := n.svc.Ensure(ctxT(t), opts)
				if err != nil || in.How != sessions.HowJoined {
					t.Fatalf("ensuring res-s through host %s once it runs on %s: %+v, %v", n.id, runs.id, in, err)
				}
				if _, open := n.h.Sessions().Get("res-s"); open != (n == runs) {
					t.Fatalf("res-s runs on %s and is open on host %s: %v", runs.id, n.id, open)
				}
				_, err = n.svc.Ensure(ctxT(t), sessions.EnsureOptions{OpenOptions: opts.OpenOptions, Mode: sessions.EnsureCreate})
				if !errs.Has(err, session.SessionLocked, sessions.ReasonOpenHere) {
					t.Fatalf("creating res-s again through host %s: %v", n.id, err)
				}
			}
			if err := other.svc.Close(ctxT(t), "res-s"); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the lease of res-s to go", func() bool { return owner(t, leases(t, c.Node(1), stream), "res-s") == "" })
		}
		resumes(t, b, a)
		resumes(t, a, b)
	})

	t.Run("delete", func(t *testing.T) {
		ensure(t, "del-s", "main")
		// Open on a: b's delete goes there, and a refuses it as it
		// refuses its own.
		err := b.svc.Delete(ctxT(t), "del-s")
		if !errs.Has(err, session.SessionLocked, sessions.ReasonOpenHere) {
			t.Fatalf("deleting a session host a runs through host b: %v", err)
		}
		if err := b.svc.Close(ctxT(t), "del-s"); err != nil {
			t.Fatal(err)
		}
		if _, open := a.h.Sessions().Get("del-s"); open {
			t.Fatal("host b's close left del-s open on a")
		}
		// Open nowhere: deleted from the shared store. The release of a's
		// lease may reach b's server a moment after the close returned.
		var err2 error
		eventually(t, "the delete through host b", func() bool {
			err2 = b.svc.Delete(ctxT(t), "del-s")
			return !errs.Has(err2, session.SessionLocked, session.ReasonOtherProcess)
		})
		if err2 != nil {
			t.Fatal(err2)
		}
		list, err := a.svc.List(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(list, func(s session.Summary) bool { return s.ID == "del-s" }) {
			t.Fatal("the store still lists del-s after its delete")
		}
		if _, err := a.svc.History(ctxT(t), "del-s", 0); !errs.HasCode(err, session.NotFound) {
			t.Fatalf("reading the deleted session: %v", err)
		}
	})

	t.Run("image", func(t *testing.T) {
		ensure(t, "img-s", "main")
		var pic bytes.Buffer
		if err := png.Encode(&pic, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
			t.Fatal(err)
		}
		turn, err := b.svc.Prompt(ctxT(t), "img-s", sessions.PromptRequest{Content: "look",
			Parts: []llm.Part{{Type: llm.PartImage, MediaType: "image/png", Name: "pic.png", Data: pic.Bytes()}}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := turn.Wait(ctxT(t))
		if err != nil || !r.Ran() || r.End.Type != session.TurnEnd || r.RequestID != turn.RequestID {
			t.Fatalf("waiting through host b for the turn: %+v, %v", r, err)
		}
		evs, err := b.svc.History(ctxT(t), "img-s", 0)
		if err != nil {
			t.Fatal(err)
		}
		ref := ""
		for _, e := range evs {
			if e.Type == session.UserMessage && e.Message != nil {
				for _, p := range e.Message.Parts {
					if p.Type == llm.PartImage {
						ref = p.Ref
					}
				}
			}
		}
		if ref == "" {
			t.Fatalf("the log host b reads names no image: %+v", evs)
		}
		p, data, err := b.svc.Attachment(ctxT(t), "img-s", ref)
		if err != nil || !bytes.Equal(data, pic.Bytes()) || p.MediaType != "image/png" {
			t.Fatalf("reading the image through host b: %+v, %d bytes, %v", p, len(data), err)
		}
		// The turn's end is logged before its agent says it is idle.
		if err := b.svc.Idle(ctxT(t), "img-s"); err != nil {
			t.Fatal(err)
		}
		in, err := b.svc.Info(ctxT(t), "img-s")
		if err != nil || in.LastSeq < r.End.Seq || in.Running {
			t.Fatalf("host b's Info of img-s: %+v, %v", in, err)
		}
		list, err := b.svc.List(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(list, func(s session.Summary) bool { return s.ID == "img-s" }); i < 0 || list[i].State != session.StateOpen {
			t.Fatalf("host b lists img-s, open on a, as %+v", list)
		}
		o, ok, err := b.svc.Outcome(ctxT(t), "img-s", turn.RequestID)
		if err != nil || !ok || o.MessageID != turn.MessageID {
			t.Fatalf("host b's Outcome: %+v %v %v", o, ok, err)
		}
		notOnB(t, "img-s")
	})

	t.Run("errors keep their codes", func(t *testing.T) {
		_, err := b.svc.Info(ctxT(t), "never-s")
		if !errs.HasCode(err, sessions.NotFound) {
			t.Fatalf("Info of a session never opened: %v", err)
		}
		if err := b.svc.Idle(ctxT(t), "img-s"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.svc.Commands(ctxT(t), "img-s"); err != nil {
			t.Fatal(err)
		}
		// A plan operation is forwarded to the owner, whose agent has no
		// plan mode: the code comes back.
		if _, err := b.svc.Plan(ctxT(t), "img-s", sessions.PlanRequest{Op: sessions.PlanGet}); !errs.HasCode(err, sessions.NoPlanMode) {
			t.Fatalf("Plan through host b: %v", err)
		}
	})
}
