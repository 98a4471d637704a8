package jsonl

import (
	"bufio"
	stdctx "context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// flockEnv makes the test binary a second process that takes the lock of
// a session, named by the variable as dir/id, says "ready" and holds it
// until stdin closes.
const flockEnv = "DSH_JSONL_TEST_FLOCK"

func init() {
	path := os.Getenv(flockEnv)
	if path == "" {
		return
	}
	wr, err := newFiles(filepath.Dir(path)).lock(filepath.Base(path), true)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	wr.Release()
	os.Exit(0)
}

// holdElsewhere starts a second process holding the lock of session id in
// dir; it lets go when the test ends.
func holdElsewhere(t *testing.T, dir, id string) (pid int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), flockEnv+"="+filepath.Join(dir, id))
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the holder process said %q", line)
	}
	return cmd.Process.Pid
}

func newFiles(dir string) *files {
	return &files{dir: dir, log: hclog.NewNullLogger(), commit: newCommitter(false)}
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// turn is the events of one turn; an unended turn stops after a tool call.
func turn(n int, prompt string, ended bool) []session.Event {
	ev := []session.Event{
		{Type: session.TurnStart, Turn: n},
		{Type: session.UserMessage, Turn: n, Message: &llm.Message{Role: llm.RoleUser, Content: prompt}},
		{Type: session.StepStart, Turn: n, Step: 1},
	}
	if !ended {
		return append(ev, session.Event{Type: session.AssistantMessage, Turn: n, Step: 1, Message: &llm.Message{
			Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "bash"}}}})
	}
	return append(ev,
		session.Event{Type: session.AssistantMessage, Turn: n, Step: 1, Message: &llm.Message{Role: llm.RoleAssistant, Content: "done"}},
		session.Event{Type: session.StepEnd, Turn: n, Step: 1},
		session.Event{Type: session.TurnEnd, Turn: n, Reason: "stop"})
}

// writeLog writes events as session id of agent through the plugin's own
// writer, numbering them and timing them a second apart.
func writeLog(t testing.TB, w *files, id, agent string, events ...[]session.Event) {
	t.Helper()
	wr, err := w.lock(id, true)
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Release()
	var seq int64
	for _, group := range events {
		for _, e := range group {
			seq++
			e.Seq, e.Time = seq, t0.Add(time.Duration(seq)*time.Second)
			wr.add(agent, "", e)
		}
	}
	if err := wr.write(seq); err != nil {
		t.Fatal(err)
	}
}

func byID(list []session.Summary) map[string]session.Summary {
	m := map[string]session.Summary{}
	for _, s := range list {
		m[s.ID] = s
	}
	return m
}

func TestListDescribesEverySessionWithoutItsLog(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	long := "Refactor the parser\n\tso that   it streams " + strings.Repeat("tokens ", 20)
	writeLog(t, w, "done", "main", turn(1, long, true), turn(2, "again", true))
	writeLog(t, w, "cut", "coder", turn(1, "first", true), turn(2, "second", false))
	writeLog(t, w, "elsewhere", "main", turn(1, "held by another process", true))
	writeLog(t, w, "here", "main", turn(1, "held by this process", true))
	writeLog(t, w, "crashed", "main", turn(1, "its writer died", true))
	writeLog(t, w, "partial", "main", turn(1, "a write was cut", true))
	os.WriteFile(filepath.Join(dir, "corrupt.jsonl"), []byte("this is not json\n"), 0o600)
	writeLog(t, w, "badtail", "main", turn(1, "then garbage", true))
	f, _ := os.OpenFile(filepath.Join(dir, "badtail.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":7,"type":"from/the-future"}` + "\n")
	f.Close()
	os.WriteFile(filepath.Join(dir, "empty.jsonl"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("foreign"), 0o600)
	os.WriteFile(filepath.Join(dir, "bad id.jsonl"), []byte("{}\n"), 0o600)
	// A writer killed mid-write leaves half a line; a holder that died
	// leaves its open line, naming it, in the catalog.
	f, _ = os.OpenFile(filepath.Join(dir, "partial.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":7,"type":"turn/st`)
	f.Close()
	if err := note(dir, encodeEntry(kindOpen, session.Summary{ID: "crashed", Title: holder{PID: 999999, Host: "gone"}.encode()}), true); err != nil {
		t.Fatal(err)
	}
	pid := holdElsewhere(t, dir, "elsewhere")
	wr, err := w.lock("here", true)
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Release()

	list, read, err := w.list(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := byID(list)
	if len(list) != 9 {
		t.Fatalf("listed %d sessions, want 9 (foreign and misnamed files skipped): %+v", len(list), list)
	}
	d := got["done"]
	wantTitle := "Refactor the parser so that it streams " + strings.Repeat("tokens ", 6)
	wantTitle = wantTitle[:session.TitleMax-1] + "…"
	if d.Title != wantTitle || d.Agent != "main" || d.Turns != 2 || d.State != session.StateIdle ||
		!d.Created.Equal(t0.Add(time.Second)) || !d.Updated.Equal(t0.Add(12*time.Second)) {
		t.Fatalf("done: %+v\nwant title %q", d, wantTitle)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "done.jsonl")); d.Size != fi.Size() {
		t.Fatalf("done: size %d, file %d", d.Size, fi.Size())
	}
	if c := got["cut"]; c.State != session.StateInterrupted || c.Turns != 2 || c.Agent != "coder" || c.Title != "first" {
		t.Fatalf("cut: %+v", c)
	}
	if e := got["elsewhere"]; e.State != session.StateOpen || !strings.Contains(e.Holder, fmt.Sprintf("process %d", pid)) || e.Title != "held by another process" {
		t.Fatalf("elsewhere: %+v (holder pid %d)", e, pid)
	}
	if h := got["here"]; h.State != session.StateOpen || !strings.Contains(h.Holder, fmt.Sprintf("process %d", os.Getpid())) {
		t.Fatalf("here: %+v", h)
	}
	if c := got["crashed"]; c.State != session.StateIdle || c.Holder != "" {
		t.Fatalf("crashed: a dead holder's record made it %+v", c)
	}
	if p := got["partial"]; p.State != session.StateIdle || p.Turns != 1 {
		t.Fatalf("partial: the half line after the turn's end gave %+v", p)
	}
	if c := got["corrupt"]; c.State != session.StateCorrupt || !strings.Contains(c.Error, "corrupt.jsonl:1") {
		t.Fatalf("corrupt: %+v", c)
	}
	if b := got["badtail"]; b.State != session.StateCorrupt || !strings.Contains(b.Error, `unknown event type "from/the-future"`) || b.Title != "then garbage" {
		t.Fatalf("badtail: %+v", b)
	}
	if e := got["empty"]; e.State != session.StateIdle || e.Turns != 0 || e.Size != 0 {
		t.Fatalf("empty: %+v", e)
	}
	if read <= 0 {
		t.Fatal("the listing counted no bytes read")
	}
	// Listing takes no lock and leaves nothing behind.
	if _, err := os.Stat(filepath.Join(dir, "corrupt.lock")); err == nil {
		t.Fatal("listing created a lock file")
	}
	again, err := w.lock("crashed", true)
	if err != nil {
		t.Fatalf("after the listing the session cannot be taken: %v", err)
	}
	again.Release()
}

// TestListReadsHeadAndTailOnly: a 5 MB log costs a listing a few KB; a log
// ending in one large event costs about that event.
func TestListReadsHeadAndTailOnly(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	var turns [][]session.Event
	big := strings.Repeat("x", 64<<10)
	for n := 1; n <= 80; n++ {
		tt := turn(n, fmt.Sprintf("prompt %d", n), true)
		tt[3].Message.Content = big
		turns = append(turns, tt)
	}
	writeLog(t, w, "big", "main", turns...)
	fi, _ := os.Stat(filepath.Join(dir, "big.jsonl"))
	if fi.Size() < 5<<20 {
		t.Fatalf("the log is only %d bytes", fi.Size())
	}
	list, read, err := w.list(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	if read > headSize+tailSize+256 {
		t.Fatalf("listing a %d-byte log read %d bytes", fi.Size(), read)
	}
	if s := list[0]; s.Turns != 80 || s.Title != "prompt 1" || s.State != session.StateIdle {
		t.Fatalf("big: %+v", s)
	}

	// The last event is 200 KB: the tail grows until it holds it.
	last := turn(81, "p", false)
	last[3].Message.Content = strings.Repeat("y", 200<<10)
	os.Remove(filepath.Join(dir, "big.jsonl"))
	writeLog(t, w, "tail", "main", turn(1, "p", true), last)
	list, read, err = w.list(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := list[0]; s.State != session.StateInterrupted || s.Turns != 81 {
		t.Fatalf("tail: %+v", s)
	}
	if read > 2*(200<<10)+headSize+tailSize+256 {
		t.Fatalf("a log ending in a 200 KB event cost %d bytes", read)
	}
}

// TestTitleOfAPromptLongerThanTheHead: the title comes from the start of a
// first prompt the head holds only part of, escapes decoded.
func TestTitleOfAPromptLongerThanTheHead(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	writeLog(t, w, "s", "main", turn(1, "Caf\u00e9 \"quoted\" \\ é→ "+strings.Repeat("z", 3*headSize), true))
	list, read, err := w.list(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := `Café "quoted" \ é→ ` + strings.Repeat("z", session.TitleMax-20) + "…"
	if s := list[0]; s.Title != want || s.State != session.StateIdle || s.Turns != 1 {
		t.Fatalf("got %+v\nwant title %q", s, want)
	}
	if read > headSize+tailSize+256 {
		t.Fatalf("read %d bytes", read)
	}
}

func TestDelete(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	ctx := stdctx.Background()
	writeLog(t, w, "a", "main", turn(1, "p", true))
	writeLog(t, w, "b", "main", turn(1, "p", true))
	writeLog(t, w, "c", "main", turn(1, "p", true))

	if err := w.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, "a"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
	if err := w.Delete(ctx, "never"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("deleting a missing session: %v", err)
	}
	if err := w.Delete(ctx, "../x"); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("deleting a bad id: %v", err)
	}

	before, _ := os.ReadFile(filepath.Join(dir, "b.jsonl"))
	pid := holdElsewhere(t, dir, "b")
	err := w.Delete(ctx, "b")
	if !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", pid)) {
		t.Fatalf("deleting a session held elsewhere: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "b.jsonl")); string(after) != string(before) {
		t.Fatal("a refused delete changed the log")
	}

	wr, err := w.lock("c", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, "c"); !errs.HasCode(err, session.SessionLocked) {
		t.Fatalf("deleting a session this process holds: %v", err)
	}
	wr.Release()
	if err := w.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	want := []string{filepath.Join(dir, catalogName), filepath.Join(dir, "b.jsonl")}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("after the deletes the directory holds %v; want %v", names, want)
	}
	// The id is free again, with a fresh log.
	writeLog(t, w, "a", "main", turn(1, "new", true))
	if list, _, _ := w.list(ctx); len(byID(list)["a"].Title) == 0 || byID(list)["a"].Title != "new" {
		t.Fatalf("the recreated session lists as %+v", byID(list)["a"])
	}
}

// TestALogDeletedUnderALockerIsNotTrusted: a locker that opened the log
// before a delete removed it must not think it holds the session.
func TestALogDeletedUnderALockerIsNotTrusted(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	path := filepath.Join(dir, "s.jsonl")
	old, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	os.Remove(path)
	if samePath(old, path) {
		t.Fatal("a removed log passes as the one at its path")
	}
	f, created, err := w.lockLog("s", true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !created || !samePath(f, path) {
		t.Fatal("lockLog holds a file that is not at its path")
	}
}
