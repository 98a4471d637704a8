package faults

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
)

// The write failure is real, not simulated: the file size limit
// (RLIMIT_FSIZE) is set below the size the session file already has, so
// every append fails with EFBIG ("file too large") while reads and the
// small lock file still work. Go ignores SIGXFSZ, so the write returns the
// error instead of killing the process.

// bigPrompt makes a session file grow past the limit in a few turns.
var bigPrompt = strings.Repeat("x", 3000)

const fsizeLimit = 4096 // bytes; the session file is made larger first

// limitFileSize sets the soft RLIMIT_FSIZE of this process and returns the
// function that restores it.
func limitFileSize(t *testing.T, bytes uint64) (restore func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = bytes
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	restore = func() { once.Do(func() { syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old) }) }
	t.Cleanup(restore)
	return restore
}

// TestSessionWriteFailsThenRetries makes the session writes of a running
// host fail: the turn reports SESSION_FLUSH_FAILED, its events stay in
// memory, and once writes work again the next checkpoint writes them, in
// order and once.
func TestSessionWriteFailsThenRetries(t *testing.T) {
	work := t.TempDir()
	sessions := filepath.Join(work, "sessions")
	h := startHost(t, strings.ReplaceAll(echoYAML, "dir: sessions", "dir: "+sessions))
	agent, _ := h.Agent("main")
	reports := make(chan error, 64)
	off, err := agents.EventError.On(h.Root(), func(_ stdctx.Context, r agents.ErrorReport) error {
		select {
		case reports <- r.Err:
		default:
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer off()
	say := func(text string) {
		t.Helper()
		if _, err := h.Controller().Deliver(stdctx.Background(), agent, agentcontroller.Request{Mode: agentcontroller.Followup, Content: text}); err != nil {
			t.Fatal(err)
		}
		agent.WhenIdle(stdctx.Background())
	}
	for i := range 3 {
		say(fmt.Sprint(i, bigPrompt))
	}

	o := &outcome{fault: "session writes fail (EFBIG), then work again"}
	defer record(o)
	for i := range 2 * scale() {
		o.tries++
		doomed, next := fmt.Sprintf("doomed-%d", i), fmt.Sprintf("next-%d", i)
		restore := limitFileSize(t, fsizeLimit)
		say(doomed)
		failedAt := time.Now()
		restore()
		select {
		case err := <-reports:
			if !errs.HasCode(err, "SESSION_FLUSH_FAILED") || !strings.Contains(err.Error(), "file too large") {
				t.Fatalf("the turn reported %v, want SESSION_FLUSH_FAILED with the cause", err)
			}
			o.refuse("SESSION_FLUSH_FAILED reported")
		case <-time.After(hangLimit):
			t.Fatal("a failed session write was never reported")
		}
		if n := promptCount(readSession(t, sessions, "s1"))[doomed]; n != 0 {
			t.Fatalf("try %d: %q reached the file although every write failed", i, doomed)
		}
		inMemory := 0
		for _, e := range agent.Session().Events(1) {
			if e.Message != nil && e.Message.Content == doomed {
				inMemory++
			}
		}
		if inMemory != 1 {
			o.lost++
			t.Fatalf("try %d: %q is in memory %d times after the failed write, want 1", i, doomed, inMemory)
		}

		say(next) // its checkpoint retries what the failed one could not write
		o.recover = append(o.recover, time.Since(failedAt))
		counts := promptCount(readSession(t, sessions, "s1"))
		switch {
		case counts[doomed] == 0 || counts[next] == 0:
			o.lost++
			t.Fatalf("try %d: after the retry the file holds %q %d times and %q %d times", i, doomed, counts[doomed], next, counts[next])
		case counts[doomed] > 1 || counts[next] > 1:
			o.doubled++
			t.Fatalf("try %d: the retry wrote %q %d times", i, doomed, counts[doomed])
		}
		o.kept++
		for len(reports) > 0 { // a turn may report each failed checkpoint
			<-reports
		}
	}
}

// TestDshExitsNonZeroWhenItCannotPersist runs `dsh run -p` on a session it
// can read but never write: dsh answers, reports SESSION_FLUSH_FAILED and
// exits non-zero; the file keeps every earlier turn and a later run
// resumes it.
func TestDshExitsNonZeroWhenItCannotPersist(t *testing.T) {
	b := binaries(t)
	work := t.TempDir()
	cfg := writeFile(t, work, "echo.yaml", echoYAML)
	for i := range 3 {
		if code := startDsh(t, b, work, cfg, "", "-p", fmt.Sprint(i, bigPrompt)).wait(t); code != 0 {
			t.Fatalf("setup run %d: exit %d", i, code)
		}
	}
	if st, err := os.Stat(filepath.Join(work, "sessions", "s1.jsonl")); err != nil || st.Size() <= fsizeLimit {
		t.Fatalf("the session file must outgrow the limit first: %v", err)
	}
	o := &outcome{fault: "dsh run cannot persist (EFBIG)"}
	defer record(o)
	for i := range 2 * scale() {
		o.tries++
		doomed := fmt.Sprintf("doomed-%d", i)
		// ulimit -f counts 512-byte blocks in sh.
		r := startDsh(t, b, work, cfg, fmt.Sprintf("ulimit -f %d;", fsizeLimit/512), "-p", doomed)
		code := r.wait(t)
		failedAt := time.Now()
		if code == 0 || !strings.Contains(r.stderr.String(), "SESSION_FLUSH_FAILED") {
			o.lost++
			t.Fatalf("dsh could not persist the turn yet exited %d\nstderr: %s", code, r.stderr)
		}
		o.refuse(fmt.Sprintf("exit %d SESSION_FLUSH_FAILED", code))
		after := startDsh(t, b, work, cfg, "", "-p", fmt.Sprint("after-", i))
		if code := after.wait(t); code != 0 {
			t.Fatalf("the run after the failed one: exit %d\nstderr: %s", code, after.stderr)
		}
		o.recover = append(o.recover, time.Since(failedAt))
		counts := promptCount(readSession(t, filepath.Join(work, "sessions"), "s1"))
		for j := range 3 {
			if counts[fmt.Sprint(j, bigPrompt)] != 1 {
				t.Fatalf("an earlier turn (%d) is damaged after the failed run", j)
			}
		}
	}
}
