package agentcontroller_test

import (
	stdctx "context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/plugins/admission/ratelimit"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

// withImage is a delivery whose Prepare stores an image in store, as the
// session controller's does.
func withImage(store *attachments.Store, text string) agentcontroller.Request {
	req := send("")
	png := []byte("\x89PNG\r\n\x1a\n" + text) // the signature is what sniffing reads
	req.Prepare = func(stdctx.Context) (agentcontroller.Prepared, error) {
		parts, release, err := store.Admit("s1", []llm.Part{{Type: llm.PartText, Text: text}, {Type: llm.PartImage, Data: png}})
		if err != nil {
			return agentcontroller.Prepared{}, err
		}
		return agentcontroller.Prepared{Content: llm.TextOf(parts), Parts: parts, Release: release}, nil
	}
	return req
}

func blobCount(t testing.TB, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// Every way a delivery can fail after Prepare stored its attachments
// leaves the store as it was; the one that enters keeps them.
func TestADeliveryThatStaysOutLeavesNoAttachment(t *testing.T) {
	refuse := func(e *env) {
		agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			return agentcontroller.Reject("test/no", "no images today", false), nil
		})
	}
	cases := []struct {
		name string
		run  func(t *testing.T, e *env, store *attachments.Store) error
	}{
		{"refused by admission", func(t *testing.T, e *env, store *attachments.Store) error {
			refuse(e)
			_, err := e.ctl.Deliver(stdctx.Background(), e.agent("a"), withImage(store, "look"))
			return err
		}},
		{"refused by the rate-limit plugin", func(t *testing.T, e *env, store *attachments.Store) error {
			e.Apply(ratelimit.Plugin, ratelimit.Config{PerMinute: 1, Burst: 1})
			a := e.agent("a")
			if _, err := e.ctl.Deliver(stdctx.Background(), a, send("the one the rate allows")); err != nil {
				t.Fatal(err)
			}
			_, err := e.ctl.Deliver(stdctx.Background(), a, withImage(store, "look"))
			return err
		}},
		{"cancelled while admission holds it", func(t *testing.T, e *env, store *attachments.Store) error {
			g := newHoldGate()
			g.install(t, e)
			ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
			r := e.deliverAsync(ctx, e.agent("a"), withImage(store, "hold"))
			g.waitHolding(t)
			cancel(errors.New("the user pressed escape"))
			return wait(t, r).err
		}},
		{"agent gone during admission", func(t *testing.T, e *env, store *attachments.Store) error {
			g := newHoldGate()
			g.install(t, e)
			a := e.agent("a")
			r := e.deliverAsync(stdctx.Background(), a, withImage(store, "hold"))
			g.waitHolding(t)
			e.remove(a)
			close(g.release)
			return wait(t, r).err
		}},
		{"insertion refused by BeforeInsert", func(t *testing.T, e *env, store *attachments.Store) error {
			req := withImage(store, "look")
			req.BeforeInsert = func(llm.Message) error { return errors.New("the session log is full") }
			_, err := e.ctl.Deliver(stdctx.Background(), e.agent("a"), req)
			return err
		}},
		{"agent disposed before insertion", func(t *testing.T, e *env, store *attachments.Store) error {
			a := e.agent("a")
			req := withImage(store, "look")
			// Gone between the admission and the inbox: the inbox refuses.
			req.BeforeInsert = func(llm.Message) error { e.remove(a); return nil }
			_, err := e.ctl.Deliver(stdctx.Background(), a, req)
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			dir := t.TempDir()
			store, err := attachments.Open(dir, attachments.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.run(t, e, store); err == nil {
				t.Fatal("the delivery succeeded")
			}
			// A cancelled sender is answered before the delivery settles.
			waitFor(t, "the delivery to settle", func() bool { return e.ctl.Waiting("a") == 0 && blobCount(t, dir) == 0 })
		})
	}
}

func TestAnAdmittedDeliveryKeepsItsAttachmentAndCarriesReferences(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	store, _ := attachments.Open(dir, attachments.Limits{})
	got := make(chan llm.Message, 1)
	agentcontroller.EventInserted.On(e.root, func(_ stdctx.Context, in agentcontroller.Inserted) error {
		got <- in.Message
		return nil
	})
	if _, err := e.ctl.Deliver(stdctx.Background(), e.agent("a"), withImage(store, "look")); err != nil {
		t.Fatal(err)
	}
	m := <-got
	if m.Content != "look" || len(m.Parts) != 2 || m.Parts[1].Ref == "" || m.Parts[1].Data != nil {
		t.Fatalf("inserted %+v", m)
	}
	if !store.Has(m.Parts[1].Ref) || blobCount(t, dir) != 1 {
		t.Fatal("the admitted message's attachment is not in the store")
	}
}
