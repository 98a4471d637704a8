package execplugin_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/execplugin"
)

// TestCallsShareOneStream: a Go plugin's calls travel on its Mux stream,
// 200 at once included, and a call whose next calls the same plugin again
// — three deep — gets each answer right: the nested calls are frames of
// their own on the stream the outer call waits on.
func TestCallsShareOneStream(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := startExec(t, execConfig(bin, `{upper: true}`, ""))
	p := binary(h, "guard")
	if got, err := send(h, stdctx.Background(), "main", "hello"); err != nil || got != "HELLO" {
		t.Fatalf("%q %v", got, err)
	}
	before, serving := execplugin.MuxCalls(p)
	if !serving || before == 0 {
		t.Fatalf("the admission did not travel on the stream: %d calls, serving %v", before, serving)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			text := fmt.Sprintf("call %d", i)
			got, err := execplugin.CallAdmissionThen(p, stdctx.Background(), text, func(stdctx.Context) error { return nil })
			if err == nil && got != strings.ToUpper(text) {
				err = fmt.Errorf("%q got the answer %q", text, got)
			}
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	var nest func(depth int) func(stdctx.Context) error
	nest = func(depth int) func(stdctx.Context) error {
		return func(ctx stdctx.Context) error {
			if depth == 3 {
				return nil
			}
			text := fmt.Sprintf("depth %d", depth+1)
			got, err := execplugin.CallAdmissionThen(p, ctx, text, nest(depth+1))
			if err == nil && got != strings.ToUpper(text) {
				err = fmt.Errorf("the nested call %q got %q", text, got)
			}
			return err
		}
	}
	if got, err := execplugin.CallAdmissionThen(p, stdctx.Background(), "depth 0", nest(0)); err != nil || got != "DEPTH 0" {
		t.Fatalf("%q %v", got, err)
	}
	after, serving := execplugin.MuxCalls(p)
	if !serving || after-before != 204 {
		t.Fatalf("want 204 more calls on the same stream, got %d (serving %v)", after-before, serving)
	}
}

// TestCancellingOneCallKeepsTheStream: a call cancelled by its caller, and
// one cut by the entry's timeout, end in the plugin (its handler's ctx is
// cancelled) with their own errors, while the stream serves on.
func TestCancellingOneCallKeepsTheStream(t *testing.T) {
	bin, _ := binaries(t)
	marker := filepath.Join(t.TempDir(), "marker")
	h, _ := startExec(t, execConfig(bin, fmt.Sprintf(`{hold_word: wait, hold_ms: 60000, marker: %q}`, marker), "    timeout: 2s\n"))
	p := binary(h, "guard")
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	done := make(chan error, 1)
	go func() { done <- execplugin.CallAdmission(p, ctx, "wait") }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != stdctx.Canceled {
		t.Fatalf("a cancelled call: %v", err)
	}
	waitForFile(t, marker)
	os.Remove(marker)
	calls, serving := execplugin.MuxCalls(p)
	if err := execplugin.CallAdmission(p, stdctx.Background(), "hello"); err != nil || !serving {
		t.Fatalf("after a cancel: %v (serving %v)", err, serving)
	}
	if err := execplugin.CallAdmission(p, stdctx.Background(), "wait"); !errs.HasCode(err, execplugin.PluginTimeout) {
		t.Fatalf("a call past the entry's timeout: %v", err)
	}
	waitForFile(t, marker)
	if err := execplugin.CallAdmission(p, stdctx.Background(), "hello"); err != nil {
		t.Fatal(err)
	}
	if after, serving := execplugin.MuxCalls(p); after != calls+3 || !serving {
		t.Fatalf("the calls after a cancel must take the same stream: %d then %d (serving %v)", calls, after, serving)
	}
}

// TestCrashOnTheStream: a plugin that dies with calls in flight on its
// stream fails them as PLUGIN_CRASHED, is restarted, and the new process
// serves on a new stream.
func TestCrashOnTheStream(t *testing.T) {
	bin, _ := binaries(t)
	h, logs := startExec(t, execConfig(bin, `{hold_word: wait, hold_ms: 60000, crash_word: boom}`, ""))
	p := binary(h, "guard")
	old := execplugin.PID(p)
	held := make(chan error, 1)
	go func() { held <- execplugin.CallAdmission(p, stdctx.Background(), "wait") }()
	time.Sleep(100 * time.Millisecond)
	if err := execplugin.CallAdmission(p, stdctx.Background(), "boom"); !errs.HasCode(err, execplugin.PluginCrashed) {
		t.Fatalf("the crashing call: %v", err)
	}
	if err := <-held; !errs.HasCode(err, execplugin.PluginCrashed) {
		t.Fatalf("a call in flight on the stream of a crashed plugin: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for execplugin.CallAdmission(p, stdctx.Background(), "hello") != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not restarted:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if calls, serving := execplugin.MuxCalls(p); execplugin.PID(p) == old || !serving || calls != 1 {
		t.Fatalf("the new process must serve on a stream of its own: %d calls, serving %v", calls, serving)
	}
}

// TestUnaryFallback: a plugin that does not accept mux gets every call as
// an RPC of its own, and works the same.
func TestUnaryFallback(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := startExec(t, execConfig(bin, `{upper: true, refuse_word: spam}`, "    env: {TESTPLUGIN_NO_MUX: \"1\"}\n"))
	if got, err := send(h, stdctx.Background(), "main", "hello"); err != nil || got != "HELLO" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := send(h, stdctx.Background(), "main", "spam"); err == nil {
		t.Fatal("a refusal must come back")
	}
	if _, serving := execplugin.MuxCalls(binary(h, "guard")); serving {
		t.Fatal("a plugin without mux must not get a stream")
	}
}

func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared: the plugin's handler was not cancelled", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestToolCallsTakeTheStream: a tool call of a Go plugin travels on its
// stream (one that does not accept mux answers on ExecuteTool:
// TestAPluginOffTheProtocol).
func TestToolCallsTakeTheStream(t *testing.T) {
	h, _ := startExec(t, toolConfig(toolPlugin(t), "{}", "", ""))
	p, _ := h.ExecPlugin("tools")
	before, _ := execplugin.MuxCalls(p)
	if r := callTool(t, h, "main", "echo", `{"text":"hi"}`); r.IsError || !strings.Contains(r.Content, "hi") {
		t.Fatalf("%+v", r)
	}
	if after, serving := execplugin.MuxCalls(p); after != before+1 || !serving {
		t.Fatalf("the tool call did not take the stream: %d then %d calls (serving %v)", before, after, serving)
	}
}

// TestChunkBatchesTakeTheStream: a streamed answer's batches of chunks
// reach a Go plugin on its stream, every chunk once and in order.
func TestChunkBatchesTakeTheStream(t *testing.T) {
	const n = 300
	lines := streamTo(t, n, "")
	_, batches, batched, texts := messagesAndChunks(lines)
	if !slices.Equal(texts, strings.Fields(streamedAnswer(n))) || batched < n {
		t.Fatalf("the plugin heard %d text chunks in %d notifications, want %d in order", len(texts), batched, n)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "batch ") && !strings.HasSuffix(l, " on mux") {
			t.Fatalf("a batch came as an RPC of its own: %q (of %d batches)", l, batches)
		}
	}
}

// TestAStreamThatBreaksStopsTheNextItAwaits: the plugin dies while the
// rest of the chain it asked for runs in the host; that next is cancelled
// at once (nobody is left to answer), and the call fails as crashed.
func TestAStreamThatBreaksStopsTheNextItAwaits(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := startExec(t, execConfig(bin, `{upper: true}`, ""))
	p := binary(h, "guard")
	if _, err := send(h, stdctx.Background(), "main", "hello"); err != nil {
		t.Fatal(err)
	}
	cancelled := make(chan bool, 1)
	_, err := execplugin.CallAdmissionThen(p, stdctx.Background(), "hello", func(ctx stdctx.Context) error {
		if err := syscall.Kill(execplugin.PID(p), syscall.SIGKILL); err != nil {
			t.Error(err)
		}
		select {
		case <-ctx.Done():
			cancelled <- true
		case <-time.After(10 * time.Second):
			cancelled <- false
		}
		return ctx.Err()
	})
	if !<-cancelled {
		t.Fatal("the next of a plugin whose stream broke ran on uncancelled")
	}
	if !errs.HasCode(err, execplugin.PluginCrashed) {
		t.Fatalf("the call of a plugin that died during its next: %v", err)
	}
}

// TestAFrameOverGRPCsDefaultLimitTakesTheStream: a call whose input and
// answer are each over gRPC's default 4 MB message limit goes through on
// the stream, and the stream serves on (one frame refused would end every
// call on it).
func TestAFrameOverGRPCsDefaultLimitTakesTheStream(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := startExec(t, execConfig(bin, `{upper: true}`, ""))
	p := binary(h, "guard")
	big := strings.Repeat("large ", 1<<20) // 6 MiB
	got, err := execplugin.CallAdmissionThen(p, stdctx.Background(), big, func(stdctx.Context) error { return nil })
	if err != nil || got != strings.ToUpper(big) {
		t.Fatalf("a 6 MiB call: %d bytes back, %v", len(got), err)
	}
	before, _ := execplugin.MuxCalls(p)
	if got, err := execplugin.CallAdmissionThen(p, stdctx.Background(), "after", func(stdctx.Context) error { return nil }); err != nil || got != "AFTER" {
		t.Fatalf("after the large call: %q %v", got, err)
	}
	if after, serving := execplugin.MuxCalls(p); !serving || after != before+1 {
		t.Fatalf("the stream did not serve on: %d then %d calls (serving %v)", before, after, serving)
	}
}

// TestAPluginThatStopsReadingHoldsUpNoCaller: a stopped plugin reads
// nothing; once a large call has used up the stream's write quota, the
// next send blocks in gRPC. That caller still ends at its own deadline, and
// so does one queued behind its send: the host tears the stream down rather
// than wait for the health check (which here would take a minute). The
// large call, in flight on the torn-down stream, fails PLUGIN_STALLED at
// once; once the plugin goes on, calls are answered again.
func TestAPluginThatStopsReadingHoldsUpNoCaller(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := startExec(t, execConfig(bin, `{upper: true}`, "    health_timeout: 60s\n"))
	p := binary(h, "guard")
	if _, err := send(h, stdctx.Background(), "main", "hello"); err != nil {
		t.Fatal(err)
	}
	pid := execplugin.PID(p)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	large := make(chan error, 1)
	go func() {
		_, err := execplugin.CallAdmissionThen(p, stdctx.Background(), strings.Repeat("x", 3<<20), func(stdctx.Context) error { return nil })
		large <- err
	}()
	time.Sleep(300 * time.Millisecond)
	type ended struct {
		err  error
		took time.Duration
	}
	bounded := func(text string) <-chan ended {
		out := make(chan ended, 1)
		go func() {
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := execplugin.CallAdmissionThen(p, ctx, text, func(stdctx.Context) error { return nil })
			out <- ended{err, time.Since(start)}
		}()
		return out
	}
	blocked := bounded("blocked in its send")
	time.Sleep(50 * time.Millisecond)
	behind := bounded("behind")
	for _, c := range []struct {
		name string
		ch   <-chan ended
	}{{"the call whose send blocked", blocked}, {"a call behind it", behind}} {
		select {
		case e := <-c.ch:
			if !errs.HasCode(e.err, execplugin.PluginTimeout) || e.took > 2*time.Second {
				t.Fatalf("%s: %v after %s, want PLUGIN_TIMEOUT soon after 300ms", c.name, e.err, e.took)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s waited past its deadline for the plugin", c.name)
		}
	}
	select {
	case err := <-large:
		if !errs.HasCode(err, execplugin.PluginStalled) {
			t.Fatalf("the call in flight on the torn-down stream: %v, want PLUGIN_STALLED", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight on the torn-down stream never ended")
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if got, err := execplugin.CallAdmissionThen(p, stdctx.Background(), "after", func(stdctx.Context) error { return nil }); err != nil || got != "AFTER" {
		t.Fatalf("once the plugin went on: %q %v", got, err)
	}
	if execplugin.PID(p) != pid {
		t.Fatal("the plugin was restarted; the test wants the stream's own bounds")
	}
	// The plugin went on: once the wait after the stall is over, its
	// calls take a stream again rather than a connection each for the
	// rest of the process's life.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, err := execplugin.CallAdmissionThen(p, stdctx.Background(), "again", func(stdctx.Context) error { return nil }); err != nil || got != "AGAIN" {
			t.Fatalf("a call after the stall: %q %v", got, err)
		}
		if n, serving := execplugin.MuxCalls(p); serving && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin's calls never took a stream again after the stall")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if execplugin.PID(p) != pid {
		t.Fatal("the plugin was restarted to get its stream back")
	}
}

// TestACallCancelledDuringItsNextKeepsTheStream: a caller that gives up
// while the rest of its chain runs sends no answer to next, and its ended
// ctx does not read as a send held up by the plugin: the stream serves on.
func TestACallCancelledDuringItsNextKeepsTheStream(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := startExec(t, execConfig(bin, `{upper: true}`, ""))
	p := binary(h, "guard")
	for i := range 20 {
		ctx, cancel := stdctx.WithCancel(stdctx.Background())
		_, err := execplugin.CallAdmissionThen(p, ctx, "given up", func(stdctx.Context) error {
			cancel()
			return nil
		})
		if err == nil {
			t.Fatalf("call %d: a call cancelled during its next succeeded", i)
		}
		if _, serving := execplugin.MuxCalls(p); !serving {
			t.Fatalf("call %d: a caller's own cancel tore the stream down: %v", i, err)
		}
	}
	if got, err := execplugin.CallAdmissionThen(p, stdctx.Background(), "after", func(stdctx.Context) error { return nil }); err != nil || got != "AFTER" {
		t.Fatalf("after the cancelled calls: %q %v", got, err)
	}
}
