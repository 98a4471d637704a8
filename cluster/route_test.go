package cluster_test

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/natstest"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/serve/apierr"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// leases opens the stream's lease bucket on a connection of the test's.
func leases(t *testing.T, srv *server.Server, stream string) jetstream.KeyValue {
	t.Helper()
	kv, err := natstest.JetStream(t, srv.ClientURL()).KeyValue(ctxT(t), natsplugin.LeaseBucket(stream))
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// owner is the host id the lease of session id names, "" for none.
func owner(t *testing.T, kv jetstream.KeyValue, id string) string {
	t.Helper()
	e, err := kv.Get(ctxT(t), id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var r natsplugin.LeaseRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		t.Fatal(err)
	}
	return r.HostID
}

// persist makes session id persisted and owned by nobody: host n opens it,
// runs a turn and closes it.
func persist(t *testing.T, n *node, id string) {
	t.Helper()
	ss := n.open(t, id)
	if _, err := ss.Prompt(ctxT(t), sessions.PromptRequest{Content: "first"}); err != nil {
		t.Fatal(err)
	}
	n.prompts(t, id) // waits for the turn
	if err := ss.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestAPromptSentToAnotherHostPassesTheOwnersAdmission: host B forwards a
// prompt for a session of host A; A's admission admits it into A's session,
// and refuses another exactly as it refuses a local one: same code,
// reason, message and presented, through B's HTTP API too.
func TestAPromptSentToAnotherHostPassesTheOwnersAdmission(t *testing.T) {
	srv := startServer(t, 0)
	promptThroughAnotherHost(t, srv, srv, 1)
}

// TestAPromptCrossesNodesOfANATSCluster: the same with the hosts on
// different nodes of a 3-node JetStream cluster, the session log kept by
// all three.
func TestAPromptCrossesNodesOfANATSCluster(t *testing.T) {
	c := natstest.Start(t, 3)
	promptThroughAnotherHost(t, c.Node(0), c.Node(2), 3)
}

func promptThroughAnotherHost(t *testing.T, srvA, srvB *server.Server, replicas int) {
	stream := streamName()
	a := startNode(t, srvA, stream, "a", nodeOpts{refuse: "forbidden", replicas: replicas})
	b := startNode(t, srvB, stream, "b", nodeOpts{replicas: replicas})
	a.open(t, "s1")
	if got := owner(t, leases(t, srvB, stream), "s1"); got != "a" {
		t.Fatalf("the lease of s1 names host %q, not a", got)
	}

	id, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{RequestID: "r1", Content: "hello from b"})
	if err != nil || id == "" {
		t.Fatalf("the forwarded prompt: id %q, error %v", id, err)
	}
	if got := a.prompts(t, "s1"); !slices.Equal(got, []string{"hello from b"}) {
		t.Fatalf("host a's session holds the prompts %q", got)
	}
	if _, open := b.h.Sessions().Get("s1"); open {
		t.Fatal("host b opened the session host a owns")
	}

	_, remote := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{RequestID: "r2", Content: "a forbidden word"})
	_, local := a.session(t, "s1").Prompt(ctxT(t), sessions.PromptRequest{RequestID: "r3", Content: "a forbidden word"})
	if local == nil || remote == nil {
		t.Fatalf("host a's admission let a forbidden word through: local %v, forwarded %v", local, remote)
	}
	rej, ok := sessions.RejectionOf(remote)
	if !ok || !errs.HasCode(remote, sessions.PromptRejected) || rej.Reason != refuseReason || !rej.Presented || rej.RequestID != "r2" ||
		!strings.Contains(rej.Message, "host a does not take") {
		t.Fatalf("the forwarded refusal is %v (rejection %+v)", remote, rej)
	}
	lb, rb := apierr.From(local, nil), apierr.From(remote, nil)
	lb.RequestID, rb.RequestID = "", ""
	if *lb.Presented != *rb.Presented {
		t.Fatalf("presented differs: local %v, forwarded %v", *lb.Presented, *rb.Presented)
	}
	lb.Presented, rb.Presented = nil, nil
	if *lb != *rb {
		t.Fatalf("the API body of a forwarded refusal differs from a local one:\nlocal     %+v\nforwarded %+v", *lb, *rb)
	}

	// Through host b's API: the same refusal as a JSON body.
	post := api(t, b)
	status, out := post("/v1/sessions/s1/messages", `{"request_id": "h1", "content": "forbidden, over http"}`)
	if status != http.StatusUnprocessableEntity || out["code"] != string(sessions.PromptRejected) || out["reason"] != refuseReason ||
		out["presented"] != true || out["request_id"] != "h1" {
		t.Fatalf("host b's API answered %d %v", status, out)
	}
	status, out = post("/v1/sessions/s1/messages", `{"request_id": "h2", "content": "fine, over http"}`)
	if status != http.StatusAccepted || out["message_id"] == "" {
		t.Fatalf("host b's API answered %d %v", status, out)
	}
	if got := a.prompts(t, "s1"); !slices.Equal(got, []string{"hello from b", "fine, over http"}) {
		t.Fatalf("host a's session holds the prompts %q", got)
	}
}

// api serves n's HTTP API on the cluster's session service over n's
// membership, and returns a function that posts a JSON body to a path of
// it.
func api(t *testing.T, n *node) func(path, body string) (int, map[string]any) {
	t.Helper()
	svc := cluster.NewService(n.h.Sessions(), nil)
	svc.Bind(n.c)
	srv, err := serve.New(serve.Options{Sessions: svc, Config: n.cfg, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	n.api = srv
	t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), patience)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return func(path, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("status %d, body %q: %v", rec.Code, rec.Body, err)
		}
		return rec.Code, out
	}
}

// TestARetriedRequestIDDeliversOnce: a request id sent through host b,
// then straight to host a, then through b again after the session moved to
// b, is one message.
func TestARetriedRequestIDDeliversOnce(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	ss := a.open(t, "s1")
	req := sessions.PromptRequest{RequestID: "once", Content: "only once"}
	first, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ss.Prompt(ctxT(t), req)
	if err != nil || again != first {
		t.Fatalf("the retry on the owner: id %q (first %q), error %v", again, first, err)
	}
	if got := a.prompts(t, "s1"); !slices.Equal(got, []string{"only once"}) {
		t.Fatalf("host a's session holds the prompts %q", got)
	}

	// The session moves: a closes it, b claims it for the retry.
	if err := ss.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	moved, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, req)
	if err != nil || moved != first {
		t.Fatalf("the retry after the move: id %q (first %q), error %v", moved, first, err)
	}
	if got := b.prompts(t, "s1"); !slices.Equal(got, []string{"only once"}) {
		t.Fatalf("after the move the session holds the prompts %q", got)
	}
	if got := owner(t, leases(t, srv, stream), "s1"); got != "b" {
		t.Fatalf("after the move the lease names host %q", got)
	}
}

// TestASessionOwnedByNobodyIsClaimed: without a claim group the receiving
// host resumes it; with one, a live host of the group does; with no live
// host in the group, nobody does.
func TestASessionOwnedByNobodyIsClaimed(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{group: "workers"})
	b := startNode(t, srv, stream, "b", nodeOpts{claimGroup: "workers"})
	var c *node
	c = startNode(t, srv, stream, "c", nodeOpts{claimed: func(ss *sessions.Session) error { return c.api.Adopt(ss.ID()) }})
	post := api(t, c)
	kv := leases(t, srv, stream)
	for _, id := range []string{"s1", "s2", "s3"} {
		persist(t, a, id)
		if got := owner(t, kv, id); got != "" {
			t.Fatalf("closed session %s is still owned by %q", id, got)
		}
	}

	// Through c's API, which adopts what c claims.
	if status, out := post("/v1/sessions/s1/messages", `{"content": "claimed by c"}`); status != http.StatusAccepted {
		t.Fatalf("posting to c: %d %v", status, out)
	}
	if _, out := post("/v1/sessions/s1/approvals/1", `{"choice": "deny"}`); strings.Contains(out["message"].(string), "not opened by this server") {
		t.Fatalf("c's API does not answer the approvals of the session c claimed for it: %v", out)
	}
	if got := c.prompts(t, "s1"); !slices.Equal(got, []string{"first", "claimed by c"}) {
		t.Fatalf("host c resumed s1 with the prompts %q", got)
	}
	if got := owner(t, kv, "s1"); got != "c" {
		t.Fatalf("the lease of s1 names %q after c claimed it", got)
	}

	if _, err := b.c.Prompt(ctxT(t), "s2", agentcontroller.Followup, sessions.PromptRequest{Content: "for a worker"}); err != nil {
		t.Fatal(err)
	}
	if got := a.prompts(t, "s2"); !slices.Equal(got, []string{"first", "for a worker"}) {
		t.Fatalf("host a (group workers) resumed s2 with the prompts %q", got)
	}
	if _, open := b.h.Sessions().Get("s2"); open || owner(t, kv, "s2") != "a" {
		t.Fatalf("s2 went to host b or its lease names %q", owner(t, kv, "s2"))
	}

	// With the only worker gone, host b finds nobody to claim s3.
	if err := a.c.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	a.c = nil
	_, err := b.c.Prompt(ctxT(t), "s3", agentcontroller.Followup, sessions.PromptRequest{Content: "nobody"})
	if !errs.HasCode(err, cluster.NoHost) || !strings.Contains(err.Error(), `claim_group "workers"`) {
		t.Fatalf("with no worker: %v", err)
	}
	if got := owner(t, kv, "s3"); got != "" {
		t.Fatalf("s3 was claimed by %q", got)
	}
}

// TestAnUnreachableOwnerIsReported: the owner left the cluster (nothing
// answers on its subject), or took the request and went silent.
func TestAnUnreachableOwnerIsReported(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	a.open(t, "s1")
	if err := a.c.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	a.c = nil
	_, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "anyone?"})
	if !errs.Has(err, cluster.OwnerUnreachable, cluster.ReasonNoResponders) || !strings.Contains(err.Error(), "lease_ttl") {
		t.Fatalf("prompting a session of a host that left: %v", err)
	}

	// A host that takes requests and never answers: a lease naming it
	// and a subscriber on its subject that stays silent.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.Subscribe(cluster.RouteSubject(stream, "ghost"), func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(natsplugin.LeaseRecord{Holder: "a ghost", HostID: "ghost", Since: time.Now()})
	if _, err := leases(t, srv, stream).Create(ctxT(t), "s2", rec); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = b.c.Prompt(ctxT(t), "s2", agentcontroller.Followup, sessions.PromptRequest{Content: "anyone?"})
	if !errs.Has(err, cluster.OwnerUnreachable, cluster.ReasonTimeout) {
		t.Fatalf("prompting a session of a silent host: %v", err)
	}
	if waited := time.Since(start); waited < time.Second || waited > patience/2 {
		t.Fatalf("the silent host was given up on after %s; the request timeout is 1s", waited)
	}
}

// TestADuplicateHostIDIsRefused while its first holder lives, and taken
// once it left.
func TestADuplicateHostIDIsRefused(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	_, err := cluster.Join(ctxT(t), clusterOptions(srv, stream, "a", b.h))
	if !errs.HasCode(err, cluster.HostIDTaken) || !strings.Contains(err.Error(), "cluster.host_id") {
		t.Fatalf("joining as a second host a: %v", err)
	}
	// The first host a still serves its sessions.
	a.open(t, "s1")
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "still a"}); err != nil {
		t.Fatal(err)
	}
	if err := a.c.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	a.c = nil
	again, err := cluster.Join(ctxT(t), clusterOptions(srv, stream, "a", a.h))
	if err != nil {
		t.Fatalf("joining as host a after it left: %v", err)
	}
	if err := again.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestACancelIsForwarded to the host running the turn.
func TestACancelIsForwarded(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{delay: time.Hour})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	a.open(t, "s1")
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "take your time"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the turn to run on host a", func() bool { return a.running(t, "s1") })
	if err := b.c.Cancel(ctxT(t), "s1"); err != nil {
		t.Fatal(err)
	}
	if a.running(t, "s1") {
		t.Fatal("the turn still runs after the forwarded cancel returned")
	}
	// Through host b's API.
	post := api(t, b)
	if status, out := post("/v1/sessions/s1/messages", `{"content": "again"}`); status != http.StatusAccepted {
		t.Fatalf("posting through b: %d %v", status, out)
	}
	eventually(t, "the second turn to run on host a", func() bool { return a.running(t, "s1") })
	if status, out := post("/v1/sessions/s1/cancel", `{}`); status != http.StatusOK {
		t.Fatalf("cancelling through b: %d %v", status, out)
	}
	if a.running(t, "s1") {
		t.Fatal("the turn still runs after the cancel through b's API returned")
	}
	// As the API of one host answers: a stored session open nowhere is
	// closed (409), one never stored is not found (404).
	if err := a.session(t, "s1").Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if status, out := post("/v1/sessions/s1/cancel", `{}`); status != http.StatusConflict || out["code"] != string(sessions.Closed) {
		t.Fatalf("cancelling a session open nowhere through b: %d %v", status, out)
	}
	if err := b.c.Cancel(ctxT(t), "s1"); !errs.HasCode(err, sessions.Closed) {
		t.Fatalf("cancelling a session open nowhere: %v", err)
	}
	if status, out := post("/v1/sessions/nowhere/cancel", `{}`); status != http.StatusNotFound || out["code"] != string(sessions.NotFound) {
		t.Fatalf("cancelling a session never stored through b: %d %v", status, out)
	}
	if err := b.c.Cancel(ctxT(t), "nowhere"); !errs.HasCode(err, sessions.NotFound) {
		t.Fatalf("cancelling a session never stored: %v", err)
	}
}

// TestAnAttachmentOverMaxPayloadIsRefused with a message naming the limit;
// one under it reaches the owner with its bytes.
func TestAnAttachmentOverMaxPayloadIsRefused(t *testing.T) {
	srv := startServer(t, 256<<10)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	a.open(t, "s1")
	file := func(n int) []llm.Part {
		return []llm.Part{{Type: llm.PartFile, MediaType: "text/plain", Name: "notes.txt", Data: bytes.Repeat([]byte("x"), n)}}
	}
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "small", Parts: file(1000)}); err != nil {
		t.Fatal(err)
	}
	// Prompt returns once the owner accepted the message; the turn that
	// puts it into the history may start a moment later.
	var msgs []llm.Message
	eventually(t, "the message in host a's history", func() bool {
		msgs = a.history(t, "s1").Messages()
		return len(msgs) > 0
	})
	if len(msgs[0].Parts) != 2 || msgs[0].Parts[1].Size != 1000 || msgs[0].Parts[1].Ref == "" {
		t.Fatalf("host a's session got %+v", msgs)
	}
	_, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "big", Parts: file(300 << 10)})
	if !errs.HasCode(err, cluster.PayloadTooLarge) || !strings.Contains(err.Error(), "max_payload of 262144 bytes") {
		t.Fatalf("a 300KB attachment: %v", err)
	}
}

// TestConcurrentClaimsMeetOnOneHost: three hosts get a message for one
// unowned session at once; one claims it, the others forward to it, and
// every message is in its log once.
func TestConcurrentClaimsMeetOnOneHost(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	var mu sync.Mutex
	var claimed []string
	claims := func(id string) nodeOpts {
		return nodeOpts{claimed: func(ss *sessions.Session) error {
			mu.Lock()
			defer mu.Unlock()
			claimed = append(claimed, id+":"+ss.ID())
			return nil
		}}
	}
	nodes := []*node{
		startNode(t, srv, stream, "a", claims("a")),
		startNode(t, srv, stream, "b", claims("b")),
		startNode(t, srv, stream, "c", claims("c")),
	}
	persist(t, nodes[0], "s1")
	errc := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() {
			_, err := n.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{RequestID: "from-" + n.id, Content: "from " + n.id})
			errc <- err
		}()
	}
	for range nodes {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	var open []*node
	for _, n := range nodes {
		if _, ok := n.h.Sessions().Get("s1"); ok {
			open = append(open, n)
		}
	}
	if len(open) != 1 {
		t.Fatalf("s1 is open on %d hosts", len(open))
	}
	if got := owner(t, leases(t, srv, stream), "s1"); got != open[0].id {
		t.Fatalf("s1 is open on host %s but its lease names %q", open[0].id, got)
	}
	mu.Lock()
	if want := []string{open[0].id + ":s1"}; !slices.Equal(claimed, want) {
		t.Errorf("Options.Claimed was called for %q, want %q", claimed, want)
	}
	mu.Unlock()
	got := open[0].prompts(t, "s1")
	slices.Sort(got)
	if want := []string{"first", "from a", "from b", "from c"}; !slices.Equal(got, want) {
		t.Fatalf("s1 holds the prompts %q, want %q", got, want)
	}
}

// TestASlowAdmissionIsNotAnUnreachableOwner: the owner's admission holds
// a message longer than the request timeout; the owner says it is still
// working, so the sender waits for the outcome.
func TestASlowAdmissionIsNotAnUnreachableOwner(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{hold: 2500 * time.Millisecond})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	a.open(t, "s1")
	start := time.Now()
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Steer, sessions.PromptRequest{Content: "slow, but steer it in"}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 2500*time.Millisecond {
		t.Fatalf("the prompt returned after %s, before host a's admission let it in", waited)
	}
	if got := a.prompts(t, "s1"); !slices.Equal(got, []string{"slow, but steer it in"}) {
		t.Fatalf("host a's session holds the prompts %q", got)
	}
}

// TestAHostThatClaimsNothingHandsSessionsOn: a host without a session
// opener (a gateway) forwards an unowned session to a host that claims it.
func TestAHostThatClaimsNothingHandsSessionsOn(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	w := startNode(t, srv, stream, "worker", nodeOpts{})
	g := startNode(t, srv, stream, "gateway", nodeOpts{noOpen: true})
	persist(t, w, "s1")
	if _, err := g.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "via the gateway"}); err != nil {
		t.Fatal(err)
	}
	if got := w.prompts(t, "s1"); !slices.Equal(got, []string{"first", "via the gateway"}) {
		t.Fatalf("the worker resumed s1 with the prompts %q", got)
	}
	if got := owner(t, leases(t, srv, stream), "s1"); got != "worker" {
		t.Fatalf("the lease of s1 names %q", got)
	}
}

// TestAClaimTheEntryPointRefusesIsUndone: Options.Claimed fails, so the
// message fails with its error and the session is closed again, owned by
// nobody.
func TestAClaimTheEntryPointRefusesIsUndone(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{claimed: func(ss *sessions.Session) error {
		return errs.New("TEST_NOT_ADOPTED", "the test adopts no session")
	}})
	persist(t, a, "s1")
	_, err := a.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "lost"})
	if !errs.HasCode(err, "TEST_NOT_ADOPTED") {
		t.Fatalf("the claim's hook failed, and the prompt returned %v", err)
	}
	if _, open := a.h.Sessions().Get("s1"); open {
		t.Fatal("the session stayed open after its hook failed")
	}
	if got := owner(t, leases(t, srv, stream), "s1"); got != "" {
		t.Fatalf("the lease of s1 names %q after the claim was undone", got)
	}
}
