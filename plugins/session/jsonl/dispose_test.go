package jsonl_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// TestATimedOutDisposeKeepsTheSessionUntilTheDriverStops: a dispose whose
// deadline passes while a tool ignores cancellation frees neither the agent
// id nor the session; the old driver's last events go to its own writer,
// and the session resumes whole once it stopped.
func TestATimedOutDisposeKeepsTheSessionUntilTheDriverStops(t *testing.T) {
	dir := t.TempDir()
	r := newRuntime(t, dir, scripted.Reply{ToolCalls: []scripted.Call{{Name: "stuck"}}}, scripted.Reply{Text: "done"})
	entered, release := make(chan struct{}), make(chan struct{})
	r.tools.Register(r.root, tools.Tool{Name: "stuck", Description: "ignores cancellation", Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
		close(entered)
		<-release
		return tools.Result{Content: "late"}, nil
	}})
	h, err := r.create(t, "a", "s1")
	if err != nil {
		t.Fatal(err)
	}
	h.Agent.Followup(llm.Message{Content: "go"})
	<-entered

	gone, cancel := stdctx.WithCancel(stdctx.Background())
	cancel() // the deadline has passed
	if err := h.Dispose(gone); !errs.HasCode(err, agents.DisposeTimeout) {
		t.Fatalf("dispose past its deadline: %v", err)
	}
	if _, live := r.registry.Get("a"); live {
		t.Fatal("a disposed agent is still listed")
	}
	if _, err := r.resume("a", "s1"); !errs.Has(err, agents.AgentExists, agents.ReasonStopping) {
		t.Fatalf("resume under the same agent id: %v", err)
	}
	if _, err := r.resume("b", "s1"); !errs.Has(err, session.SessionLocked, session.ReasonClosing) {
		t.Fatalf("resume of the session under another id: %v", err)
	}
	if _, err := newRuntime(t, dir).resume("a", "s1"); !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) {
		t.Fatalf("resume from another store: %v", err)
	}

	close(release)
	if err := h.Dispose(stdctx.Background()); err != nil {
		t.Fatalf("dispose once the tool returned: %v", err)
	}
	again, err := r.resume("a", "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Dispose(stdctx.Background())
	evs := again.Agent.Session().Events(1)
	last := evs[len(evs)-1]
	if last.Type != session.TurnEnd || last.Reason != "disposed" {
		t.Fatalf("the old turn ends with %+v", last)
	}
	if _, interrupted := again.Agent.Session().Interrupted(); interrupted {
		t.Fatal("the old driver's turn end was not written")
	}
}

// TestHostCloseReturnsAFailedFinalWrite: a session that could not be
// written at shutdown makes the host's Close fail, so dsh can exit non-zero.
func TestHostCloseReturnsAFailedFinalWrite(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, true)
	say(t, h, "one")
	path := filepath.Join(dir, "s1.jsonl")
	os.Remove(path)
	os.Mkdir(path, 0o700)
	say(t, h, "two")
	if err := h.Close(stdctx.Background()); !errs.HasCode(err, session.FlushFailed) || !strings.Contains(err.Error(), path) {
		t.Fatalf("close with an unwritable session: %v", err)
	}
}
