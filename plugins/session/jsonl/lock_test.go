package jsonl_test

import (
	"bufio"
	"bytes"
	stdctx "context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/internal/hosttest"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/session/jsonl"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// holdEnv makes the test binary a second dsh process: it starts a host on
// the session dir named by the variable, says "ready" and holds the session
// until stdin closes or it is killed.
const holdEnv = "DSH_JSONL_TEST_HOLD"

func init() {
	dir := os.Getenv(holdEnv)
	if dir == "" {
		return
	}
	cfg, err := config.Parse("hold.yaml", []byte(fmt.Sprintf(
		"plugins:\n  - use: llm.scripted\n  - use: session.jsonl\n    config: {dir: %q}\nagents:\n  - id: main\n    provider: scripted\n    session: s1\n", dir)), config.LoadOptions{Environ: []string{}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	h.Close(stdctx.Background())
	os.Exit(0)
}

// TestASecondProcessIsRefused: two processes on one session — the second is
// refused at start naming the holder, and writes nothing; a killed holder
// leaves no lock behind.
func TestASecondProcessIsRefused(t *testing.T) {
	dir := t.TempDir()
	path, _ := oneTurn(t, dir)
	before, _ := os.ReadFile(path)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	stdin, _ := cmd.StdinPipe()
	defer stdin.Close()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the holder process said %q", line)
	}

	err := startFails(t, dir, true)
	hostname, _ := os.Hostname()
	if !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) ||
		!strings.Contains(err.Error(), `"s1"`) ||
		!strings.Contains(err.Error(), fmt.Sprintf("process %d on host %q", cmd.Process.Pid, hostname)) {
		t.Fatalf("second process: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the refused process changed the session file")
	}

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	h := start(t, dir, true) // no stale lock
	say(t, h, "two")
	if err := h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	h = start(t, dir, true)
	defer h.Close(stdctx.Background())
	if got := userMessages(h); strings.Join(got, ",") != "one,two" {
		t.Fatalf("after the kill the session holds %v", got)
	}
}

// TestTwoHostsInOneProcess: the lock holds between two hosts of one
// process too, and is free once the first closes.
func TestTwoHostsInOneProcess(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, true)
	err := startFails(t, dir, true)
	if !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Fatalf("second host: %v", err)
	}
	if err := h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	start(t, dir, true).Close(stdctx.Background())
}

// runtime is the services of one dsh on dir, without the host.
type runtime struct {
	root     *dshctx.Context
	registry *agents.Registry
	store    *session.Store
	tools    *tools.Service
}

func newRuntime(t *testing.T, dir string, replies ...scripted.Reply) *runtime {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		plugin dshctx.Plugin
		config any
	}{{scripted.Plugin, scripted.Config{Replies: replies}}, {jsonl.Plugin, &jsonl.Config{Dir: dir}}, {agentloop.Plugin, agentloop.Config{}}} {
		f, _ := root.Plugin(p.plugin, p.config)
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	r := &runtime{root: root}
	r.registry, _ = agents.Key.Get(root)
	r.store, _ = session.Key.Get(root)
	r.tools, _ = tools.Key.Get(root)
	return r
}

func (r *runtime) create(t *testing.T, agentID, sessionID string) (*agents.Handle, error) {
	return r.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: agentID, SessionID: sessionID, Options: agents.Options{Provider: "scripted"}})
}

func (r *runtime) resume(agentID, sessionID string) (*agents.Handle, error) {
	return r.registry.Resume(stdctx.Background(), agents.ResumeOptions{AgentID: agentID, ResumeSessionID: sessionID, Options: agents.Options{Provider: "scripted"}})
}

// TestAReleasedWriterWritesNothing: a session whose lease was let go —
// another store now owns its file — cannot write into it.
func TestAReleasedWriterWritesNothing(t *testing.T) {
	dir := t.TempDir()
	a, b := newRuntime(t, dir), newRuntime(t, dir)
	scope, _ := a.root.Scoped("old")
	old, err := a.store.Create(scope, "old", "s1")
	if err != nil {
		t.Fatal(err)
	}
	old.Append(stdctx.Background(), session.Event{Type: session.TurnStart, Turn: 1})
	if err := old.Flush(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Create(scope, "new", "s1"); !errs.HasCode(err, session.SessionLocked) {
		t.Fatalf("a held session opened in another store: %v", err)
	}
	a.store.Close(old)
	h, err := b.resume("new", "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose(stdctx.Background())
	// The old owner's late events: refused, and the file stays the new
	// owner's.
	old.Append(stdctx.Background(), session.Event{Type: session.TurnStart, Turn: 9})
	if err := old.Flush(stdctx.Background()); !errs.Has(err, session.SessionLocked, session.ReasonFenced) {
		t.Fatalf("late flush of a released writer: %v", err)
	}
	if err := h.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	evs, err := b.store.Load(stdctx.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; len(evs) != 2 || last.Reason != session.ReasonInterrupted {
		t.Fatalf("file holds %+v", evs)
	}
}

// TestUnknownEventTypeNamesTheLine: a type this version does not know is
// an error with file:line and the type, never skipped.
func TestUnknownEventTypeNamesTheLine(t *testing.T) {
	dir := t.TempDir()
	path, lines := oneTurn(t, dir)
	at := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, `"type":"step/start"`) })
	lines[at] = strings.Replace(lines[at], `"type":"step/start"`, `"type":"step/begin"`, 1)
	os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600)
	err := startFails(t, dir, true)
	if !errs.HasCode(err, session.BadLog) || !strings.Contains(err.Error(), fmt.Sprintf("%s:%d: unknown event type \"step/begin\"", path, at+1)) {
		t.Fatalf("got %v", err)
	}
}

// TestDisposeReturnsAFailedFinalWrite: the last write of a disposed agent
// that fails reaches the caller; the events stay in memory and the session
// held, and disposing again writes them.
func TestDisposeReturnsAFailedFinalWrite(t *testing.T) {
	dir := t.TempDir()
	r := newRuntime(t, dir)
	h, err := r.create(t, "a", "s1")
	if err != nil {
		t.Fatal(err)
	}
	h.Agent.Followup(llm.Message{Content: "one"})
	h.Agent.WhenIdle(stdctx.Background())
	path := filepath.Join(dir, "s1.jsonl")
	// A directory where the file should be: no write can succeed.
	os.Rename(path, path+".aside")
	os.Mkdir(path, 0o700)
	h.Agent.Followup(llm.Message{Content: "two"})
	h.Agent.WhenIdle(stdctx.Background())
	n := h.Agent.Session().Len()

	err = h.Dispose(stdctx.Background())
	if !errs.HasCode(err, session.FlushFailed) || !strings.Contains(err.Error(), path) {
		t.Fatalf("dispose with a failing write: %v", err)
	}
	if _, err := r.create(t, "b", "s1"); !errs.Has(err, session.SessionLocked, session.ReasonClosing) {
		t.Fatalf("the unwritten session was let go: %v", err)
	}
	os.Remove(path)
	os.Rename(path+".aside", path)
	if err := h.Dispose(stdctx.Background()); err != nil {
		t.Fatalf("retried dispose: %v", err)
	}
	evs, err := r.store.Load(stdctx.Background(), "s1")
	if err != nil || len(evs) != n {
		t.Fatalf("file holds %d events (%v), want %d", len(evs), err, n)
	}
}
