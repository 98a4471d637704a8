package nats_test

import (
	stdctx "context"
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
)

// TestResumingAnIDNeverStoredIsNotFound: the session controller's Ensure
// in mode "existing" of an id the stream has no log of is
// SESSION_NOT_FOUND — not an empty session reported as resumed — and
// leaves nothing behind: no open record, no lease, so the id is still
// free to be created. Taking the lease for a resume must not be what
// makes the session exist.
func TestResumingAnIDNeverStoredIsNotFound(t *testing.T) {
	srv := startServer(t)
	stream := streamName()
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
  - use: session.nats
    config: {url: %q, stream: %q, subject_prefix: %q, lease_ttl: 3s}
agents:
  - id: main
    provider: scripted
`, srv.ClientURL(), stream, "dsh.resume."+stream)
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	ctx := stdctx.Background()
	svc := h.Sessions()
	o := sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "never"}, Mode: sessions.EnsureExisting}
	in, err := svc.Ensure(ctx, o)
	if !errs.HasCode(err, session.NotFound) {
		t.Fatalf("ensure existing of an id never stored: %+v, %v; want SESSION_NOT_FOUND", in, err)
	}
	if _, found, err := svc.Find(ctx, "never"); err != nil || found {
		t.Fatalf("the refused resume stored the session: found %v, %v", found, err)
	}
	if _, open := svc.Get("never"); open {
		t.Fatal("the refused resume left the session open")
	}
	// Nothing holds it: the same id is created, and says so.
	o.Mode = sessions.EnsureAny
	if in, err = svc.Ensure(ctx, o); err != nil || in.How != sessions.HowCreated {
		t.Fatalf("ensure of the id after the refused resume: %+v, %v; want created", in, err)
	}
	if err := svc.Close(ctx, "never"); err != nil {
		t.Fatal(err)
	}
	// Stored now (its open record), so a resume finds it.
	o.Mode = sessions.EnsureExisting
	if in, err = svc.Ensure(ctx, o); err != nil || in.How != sessions.HowResumed {
		t.Fatalf("ensure existing of the stored id: %+v, %v; want resumed", in, err)
	}
	if err := svc.Close(ctx, "never"); err != nil {
		t.Fatal(err)
	}
}

// TestLockStoredTakesNoLeaseForNothingStored: the store's resume lock of
// an id with no log fails with SESSION_NOT_FOUND and holds no lease, so
// a create of the id right after is not refused as locked.
func TestLockStoredTakesNoLeaseForNothingStored(t *testing.T) {
	srv := startServer(t)
	root, st := mustMount(t, pluginConfig(srv.ClientURL()))
	scope, err := root.Scoped("agent-x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Resume(bg, scope, "agent", "x"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("resume of nothing stored: %v", err)
	}
	s, err := st.Create(scope, "agent", "x")
	if err != nil {
		t.Fatalf("create after a refused resume: %v", err)
	}
	if err := st.Close(s); err != nil {
		t.Fatal(err)
	}
}
