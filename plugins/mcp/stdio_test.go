package mcp

import (
	stdctx "context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
)

// TestStdioToolsRunThroughThePipeline: the tools of a stdio server are
// registered as t__tool with their schemas, annotations decide parallel
// safety and approval, and calls go through validation and approval.
func TestStdioToolsRunThroughThePipeline(t *testing.T) {
	root, svc := mustMount(t, stdioConfig())
	var names []string
	for _, s := range svc.Specs(root) {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "t__echo ") || !strings.Contains(got, "t__weird_name_") {
		t.Fatalf("registered %s", got)
	}
	echo := svc.Lookup(root, "t__echo")
	if !echo.ParallelSafe || echo.Approval != tools.Allow || !strings.Contains(string(echo.Parameters), `"additionalProperties":false`) {
		t.Fatalf("echo (readOnlyHint): %+v", echo)
	}
	if w := svc.Lookup(root, "t__write"); w.ParallelSafe || w.Approval != tools.Ask {
		t.Fatalf("write (no annotations) must run alone and ask: %+v", w)
	}
	bg := stdctx.Background()
	if r := call(t, bg, root, svc, "t__echo", `{"text":"hello"}`); r.IsError || r.Content != "hello" {
		t.Fatalf("echo: %+v", r)
	}
	if r := call(t, bg, root, svc, "t__echo", `{"txt":"hello"}`); !r.IsError || !strings.Contains(r.Content, `"txt" is not a parameter`) {
		t.Fatalf("the schema must be enforced before the server is called: %+v", r)
	}
	if r := call(t, bg, root, svc, "t__write", `{"text":"x"}`); !r.IsError || !strings.Contains(r.Content, "approv") {
		t.Fatalf("an unattended call of a tool that asks must be refused: %+v", r)
	}
	if r := call(t, bg, root, svc, "t__fail", `{}`); !r.IsError || r.Content != "no such issue" {
		t.Fatalf("isError: %+v", r)
	}
}

func TestCrashFailsCallsInFlightAndTheServerComesBack(t *testing.T) {
	cfg := stdioConfig()
	cfg.Approval = "allow"
	root, svc := mustMount(t, cfg)
	bg := stdctx.Background()
	slow := make(chan tools.Result, 1)
	go func() {
		r, _ := svc.Execute(bg, root, tools.Call{Name: "t__slow", Arguments: []byte(`{}`)})
		slow <- r
	}()
	// The crash call itself is in flight when the process exits.
	r := call(t, bg, root, svc, "t__crash", `{}`)
	if !r.IsError || !strings.Contains(r.Content, `MCP server "t"`) {
		t.Fatalf("the crash call: %+v", r)
	}
	select {
	case r := <-slow:
		if !r.IsError || !strings.Contains(r.Content, `MCP server "t"`) {
			t.Fatalf("the call in flight: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight never ended")
	}
	eventually(t, "the restarted server answers", func() bool {
		r := call(t, bg, root, svc, "t__echo", `{"text":"back"}`)
		return !r.IsError && r.Content == "back"
	})
}

func TestListChangedUpdatesTheRegistry(t *testing.T) {
	cfg := stdioConfig()
	cfg.Approval = "allow"
	root, svc := mustMount(t, cfg)
	bg := stdctx.Background()
	if svc.Lookup(root, "t__extra") != nil {
		t.Fatal("extra before it was added")
	}
	call(t, bg, root, svc, "t__add", `{}`)
	eventually(t, "t__extra is registered", func() bool { return svc.Lookup(root, "t__extra") != nil })
	if r := call(t, bg, root, svc, "t__extra", `{}`); r.Content != "extra ran" {
		t.Fatalf("extra: %+v", r)
	}
	call(t, bg, root, svc, "t__retitle", `{}`)
	eventually(t, "echo's description changes", func() bool {
		e := svc.Lookup(root, "t__echo")
		return e != nil && strings.HasSuffix(e.Description, "changed")
	})
	call(t, bg, root, svc, "t__drop", `{}`)
	eventually(t, "t__extra is gone", func() bool { return svc.Lookup(root, "t__extra") == nil })
}

func TestAServerThatNeverStarts(t *testing.T) {
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	cfg := stdioConfig()
	cfg.Command = "/bin/sh"
	cfg.Args = []string{"-c", `echo x >> "$STARTS"; echo "boom: no token configured" >&2; exit 1`}
	cfg.Env = map[string]string{"STARTS": starts}

	t.Run("fail", func(t *testing.T) {
		_, _, err := mount(t, cfg)
		if !errs.HasCode(err, Unavailable) || !strings.Contains(err.Error(), "boom: no token configured") || !strings.Contains(err.Error(), "on_unavailable: skip") || !strings.Contains(err.Error(), "exited before completing the MCP handshake (exit status 1)") {
			t.Fatalf("want MCP_SERVER_UNAVAILABLE with the stderr tail and the fix: %v", err)
		}
	})
	t.Run("skip", func(t *testing.T) {
		cfg := cfg
		cfg.OnUnavailable = Skip
		os.Remove(starts)
		root, svc := mustMount(t, cfg)
		if len(svc.Specs(root)) != 0 {
			t.Fatal("tools of a server that did not start")
		}
		eventually(t, "dsh tries again", func() bool {
			b, _ := os.ReadFile(starts)
			return strings.Count(string(b), "x") >= 3
		})
	})
	t.Run("skip then up", func(t *testing.T) {
		// The server fails its first start and works from the second.
		cfg := stdioConfig()
		cfg.OnUnavailable = Skip
		cfg.Command = "/bin/sh"
		cfg.Args = []string{"-c", `if [ -e "$MARK" ]; then exec "$BIN"; fi; touch "$MARK"; echo first start fails >&2; exit 1`}
		cfg.Env = map[string]string{"MARK": filepath.Join(dir, "mark"), "BIN": os.Args[0], serverEnv: "1"}
		root, svc := mustMount(t, cfg)
		eventually(t, "the tools arrive", func() bool { return svc.Lookup(root, "t__echo") != nil })
		if r := call(t, stdctx.Background(), root, svc, "t__echo", `{"text":"up"}`); r.Content != "up" {
			t.Fatalf("%+v", r)
		}
	})
}

func TestStartTimeout(t *testing.T) {
	cfg := stdioConfig()
	cfg.Command = "/bin/sleep"
	cfg.Args = []string{"30"}
	cfg.Env = nil
	cfg.StartTimeout = 200 * time.Millisecond
	start := time.Now()
	_, _, err := mount(t, cfg)
	if !errs.HasCode(err, Unavailable) || !strings.Contains(err.Error(), "start_timeout (200ms)") {
		t.Fatalf("want a start timeout: %v", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("the failed start took %s", d)
	}
}

func TestTheServerSeesOnlyTheMinimalEnvironment(t *testing.T) {
	t.Setenv("DSH_MCP_SECRET", "sk-secret")
	t.Setenv("DSH_MCP_PASSED", "yes")
	cfg := stdioConfig()
	cfg.Command = "/bin/sh"
	cfg.Args = []string{"-c", `echo "secret=$DSH_MCP_SECRET passed=$DSH_MCP_PASSED" >&2; exit 1`}
	cfg.EnvPassthrough = []string{"DSH_MCP_PASSED"}
	_, _, err := mount(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "secret= passed=yes") {
		t.Fatalf("the child's environment: %v", err)
	}
}

// TestDisposeTearsTheServersGroupDown: a server that left a process of
// its own in the background loses it too when the entry is disposed,
// since the server leads its own process group.
func TestDisposeTearsTheServersGroupDown(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	cfg := stdioConfig()
	cfg.Command = "/bin/sh"
	cfg.Args = []string{"-c", `sleep 300 & echo $! > "$PIDFILE"; exec "$BIN"`}
	cfg.Env = map[string]string{"PIDFILE": pidFile, "BIN": os.Args[0], serverEnv: "1"}
	root, _ := mustMount(t, cfg)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if !alive(pid) {
		t.Fatal("the background process is not running")
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := root.Dispose(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server's background process is gone", func() bool { return !alive(pid) })
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// TestAResultOverTheMessageCapIsAnErrorAndTheServerStays: a real SDK
// server over stdio answers 17 MiB; the call gets "result too large" and
// the same process answers the next call — no restart.
func TestAResultOverTheMessageCapIsAnErrorAndTheServerStays(t *testing.T) {
	root, svc := mustMount(t, stdioConfig())
	bg := stdctx.Background()
	before := call(t, bg, root, svc, "t__pid", `{}`)
	r := call(t, bg, root, svc, "t__huge", `{}`)
	want := fmt.Sprintf("result too large (%d bytes, limit %d)", 17<<20, DefaultMaxMessageBytes)
	if !r.IsError || !strings.Contains(r.Content, "result too large (") || !strings.Contains(r.Content, fmt.Sprintf("limit %d)", DefaultMaxMessageBytes)) || len(r.Content) > 1000 {
		t.Fatalf("want an error result like %q, got %.300q", want, r.Content)
	}
	if after := call(t, bg, root, svc, "t__pid", `{}`); after.IsError || after.Content != before.Content {
		t.Fatalf("the server was restarted or lost: pid %q before, %+v after", before.Content, after)
	}
}

func TestFrameIDIsFoundAtEitherEnd(t *testing.T) {
	big := strings.Repeat("y", 100<<10)
	for _, c := range []struct{ line, id string }{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`, "7"},
		{`{"result":{"content":[{"type":"text","text":"` + big + `"}]},"jsonrpc":"2.0","id":"a\"b"}`, `"a\"b"`},
	} {
		f := newFrameCap(io.NopCloser(strings.NewReader(c.line+"\n"+`{"jsonrpc":"2.0","id":8,"result":{}}`+"\n")), 64<<10, func(int, bool) {})
		out, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], `"id":`+c.id) || !strings.Contains(lines[0], "result too large") || lines[1] != `{"jsonrpc":"2.0","id":8,"result":{}}` {
			t.Fatalf("%.60s…: %q", c.line, out)
		}
	}
}
