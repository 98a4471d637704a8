package nats_test

import (
	"bytes"
	stdctx "context"
	"fmt"
	"image"
	"image/png"
	"slices"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/natstest"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startAttachHost starts a host keeping its sessions on stream, as a
// cluster's hosts do, with the given attachments limits (YAML, may be
// empty), and returns its attachments store.
func startAttachHost(t *testing.T, url, stream, id, limits string) *attachments.Store {
	t.Helper()
	_, st := startAttachHostH(t, url, stream, id, limits)
	return st
}

// startAttachHostH is startAttachHost returning the host too.
func startAttachHostH(t *testing.T, url, stream, id, limits string) (*host.Host, *attachments.Store) {
	t.Helper()
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
  - use: session.nats
    config: {url: %q, stream: %q, subject_prefix: %q, lease_ttl: 3s, host_id: %q}
%sagents:
  - id: main
    provider: scripted
`, url, stream, "dsh.att."+stream, id, limits)
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	st, err := attachments.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Persistent() {
		t.Fatal("a host with session.nats keeps its attachments in memory")
	}
	return h, st
}

func pngOf(t *testing.T, seed byte) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 16, 16))
	for i := range img.Pix {
		img.Pix[i] = byte(i) ^ seed
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// An image admitted on one host is resolved on another: a session that
// moves keeps its images.
func TestAnImageAdmittedOnOneHostIsResolvedOnAnother(t *testing.T) {
	srv := startServer(t)
	stream := streamName()
	a := startAttachHost(t, srv.ClientURL(), stream, "a", "")
	b := startAttachHost(t, srv.ClientURL(), stream, "b", "")
	img := pngOf(t, 1)
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640 KB: several chunks
	parts, _, err := a.Admit("s1", []llm.Part{
		{Type: llm.PartText, Text: "look"},
		{Type: llm.PartImage, Name: "shot.png", Data: img},
		{Type: llm.PartFile, Name: "log.txt", MediaType: "text/plain", Data: big},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Resolve(parts)
	if err != nil {
		t.Fatalf("host b cannot resolve what host a admitted: %v", err)
	}
	if !bytes.Equal(got[1].Data, img) || got[1].MediaType != "image/png" || !bytes.Equal(got[2].Data, big) || got[2].Text != string(big) {
		t.Fatal("host b resolved other bytes than host a admitted")
	}
	if r, _ := b.Referrers(parts[1].Ref); !slices.Equal(r, []string{"s1"}) {
		t.Fatalf("host b sees the image referenced by %v; want s1", r)
	}
}

// A blob two sessions reference, on two hosts, survives the delete of one
// and goes with the other.
func TestABlobOfTwoSessionsSurvivesTheDeleteOfOne(t *testing.T) {
	srv := startServer(t)
	stream := streamName()
	a := startAttachHost(t, srv.ClientURL(), stream, "a", "")
	b := startAttachHost(t, srv.ClientURL(), stream, "b", "")
	img := pngOf(t, 2)
	ref, _, err := a.Put("s1", img)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Hold("s2", ref); err != nil {
		t.Fatalf("host b cannot hold what host a stored: %v", err)
	}
	if err := a.ReleaseSession("s1"); err != nil {
		t.Fatal(err)
	}
	if data, err := b.Get(ref); err != nil || !bytes.Equal(data, img) {
		t.Fatalf("deleting s1 on host a took the blob s2 references on host b: %v", err)
	}
	if err := b.ReleaseSession("s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ref); !errs.HasCode(err, attachments.NotFound) {
		t.Fatalf("after both sessions were deleted the blob reads as %v; want %s", err, attachments.NotFound)
	}
}

// The hosts' limits apply to the shared store, with the disk store's
// codes and messages.
func TestTheSharedStoreKeepsTheLimits(t *testing.T) {
	srv := startServer(t)
	a := startAttachHost(t, srv.ClientURL(), streamName(), "a", "attachments: {max_part_bytes: 1000}\n")
	_, _, err := a.Admit("s1", []llm.Part{{Type: llm.PartFile, Name: "big.bin", Data: make([]byte, 1001)}})
	if !errs.HasCode(err, attachments.TooLarge) {
		t.Fatalf("a part over max_part_bytes: %v; want %s", err, attachments.TooLarge)
	}
	if a.Written() != 0 {
		t.Fatal("a refused part was written")
	}
}

// A server that cannot be reached fails the host's start with the
// attachments store's code, naming the server.
func TestAnUnreachableServerFailsTheStoreWithItsCode(t *testing.T) {
	cfg := natsplugin.Config{}.Defaults()
	cfg.URL = "nats://127.0.0.1:1"
	_, err := cfg.AttachmentsBackend()
	if !errs.HasCode(err, attachments.StoreFailed) || !bytes.Contains([]byte(err.Error()), []byte("127.0.0.1:1")) {
		t.Fatalf("an unreachable server: %v; want %s naming it", err, attachments.StoreFailed)
	}
}

// Three hosts started together on a fresh three-node cluster all open the
// replicated attachments store (create-or-bind, retried), and what one
// stores the others read.
func TestHostsStartedTogetherShareAReplicatedAttachmentsStore(t *testing.T) {
	c := natstest.Boot(t, 3)
	cfg := natsplugin.Config{}.Defaults()
	cfg.URL, cfg.Stream, cfg.Replicas, cfg.LeaseTTL = c.URLs(), streamName(), 3, 3*time.Second
	stores := make([]*attachments.Store, 3)
	errc := make(chan error, 3)
	for i := range stores {
		go func() {
			b, err := cfg.AttachmentsBackend()
			if err == nil {
				stores[i] = attachments.NewStore(b, attachments.Limits{})
			}
			errc <- err
		}()
	}
	for range stores {
		if err := <-errc; err != nil {
			t.Fatalf("a host could not open the attachments store: %v", err)
		}
	}
	for _, s := range stores {
		t.Cleanup(func() { s.Close() })
	}
	// Reads go to each stream's leader: a replica behind the last write
	// would answer that a blob just stored is not there.
	nc, err := natsgo.Connect(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, name := range []string{"OBJ_" + natsplugin.ObjectBucket(cfg.Stream), "KV_" + natsplugin.RefsBucket(cfg.Stream)} {
		st, err := js.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if st.CachedInfo().Config.AllowDirect {
			t.Errorf("stream %s answers direct gets, which a replica behind the leader may answer", name)
		}
	}
	img := pngOf(t, 3)
	ref, _, err := stores[0].Put("s1", img)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range stores[1:] {
		if got, err := s.Get(ref); err != nil || !bytes.Equal(got, img) {
			t.Fatalf("host %d reads %v", i+1, err)
		}
	}
}

// A host that died holding the store's lock holds up the others for at
// most lease_ttl: its entry expires and they go on.
func TestALockLeftByADeadHostExpires(t *testing.T) {
	srv := startServer(t)
	cfg := natsplugin.Config{}.Defaults()
	cfg.URL, cfg.Stream, cfg.LeaseTTL = srv.ClientURL(), streamName(), 2*time.Second
	b, err := cfg.AttachmentsBackend()
	if err != nil {
		t.Fatal(err)
	}
	s := attachments.NewStore(b, attachments.Limits{})
	defer s.Close()
	// The dead host's entry, as it left it.
	nc, err := natsgo.Connect(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(t.Context(), natsplugin.LockBucket(cfg.Stream))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(t.Context(), "lock", []byte(`{"holder":"host \"dead\""}`)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, _, err := s.Put("s1", pngOf(t, 4)); err != nil {
		t.Fatalf("a store behind a dead holder's lock: %v", err)
	}
	if waited := time.Since(start); waited < time.Second || waited > cfg.LeaseTTL+2*time.Second {
		t.Fatalf("the put waited %s behind the dead holder; want about lease_ttl (%s)", waited, cfg.LeaseTTL)
	}
}

// A session prompted with an image on host a, which then stops, is
// resumed on host b: b's collection at its start keeps the image (a's log
// backs it), the resumed history's image resolves there, and deleting the
// session on b removes it.
func TestASessionResumedOnAnotherHostResolvesItsImage(t *testing.T) {
	srv := startServer(t)
	stream := streamName()
	ctx := t.Context()
	ha, _ := startAttachHostH(t, srv.ClientURL(), stream, "a", "")
	ss, err := ha.Sessions().Open(ctx, sessions.OpenOptions{Agent: "main", SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	img := pngOf(t, 5)
	if _, err := ss.Prompt(ctx, sessions.PromptRequest{RequestID: "r1", Content: "what is this",
		Parts: []llm.Part{{Type: llm.PartImage, Name: "shot.png", Data: img}}}); err != nil {
		t.Fatal(err)
	}
	if err := ha.Sessions().Idle(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := ha.Close(ctx); err != nil {
		t.Fatal(err)
	}

	hb, sb := startAttachHostH(t, srv.ClientURL(), stream, "b", "")
	if _, err := hb.Sessions().Resume(ctx, "s1", sessions.OpenOptions{Agent: "main"}); err != nil {
		t.Fatal(err)
	}
	evs, err := hb.Sessions().History(ctx, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	history, err := session.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	var ref string
	var parts []llm.Part
	for _, m := range history.Messages() {
		for _, p := range m.Parts {
			if p.Ref != "" {
				ref, parts = p.Ref, m.Parts
			}
		}
	}
	if ref == "" {
		t.Fatal("the resumed history holds no image reference")
	}
	got, err := sb.Resolve(parts)
	if err != nil {
		t.Fatalf("host b cannot resolve the image of a session host a wrote: %v", err)
	}
	found := false
	for _, p := range got {
		found = found || bytes.Equal(p.Data, img)
	}
	if !found {
		t.Fatal("host b resolved other bytes than host a stored")
	}
	if err := hb.Sessions().Close(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := hb.Sessions().Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if sb.Has(ref) {
		t.Fatal("deleting the session on host b left its image in the shared store")
	}
}
