package nats_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// crashEnv makes the test binary a dsh process on session.nats: it runs a
// turn of two tool steps and stops inside the second step's call, after
// creating the file the variable names, until it is killed. crashURLEnv
// and crashStreamEnv name the server and the stream.
const (
	crashEnv       = "DSH_NATS_TEST_CRASH"
	crashURLEnv    = "DSH_NATS_TEST_CRASH_URL"
	crashStreamEnv = "DSH_NATS_TEST_CRASH_STREAM"
)

func crashYAML(url, stream string) string {
	return fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - {text: "one. ", tool_calls: [{name: stop, arguments: '{"n":1}'}]}
        - {text: "two. ", tool_calls: [{name: stop, arguments: '{"n":2}'}]}
        - {text: "done"}
  - use: test.stop
  - use: session.nats
    config: {url: %q, stream: %q, subject_prefix: %q, lease_ttl: 1s}
agents:
  - id: main
    provider: scripted
    session: s1
`, url, stream, "dsh.crash."+stream)
}

type noStopConfig struct{}

func init() {
	plugin.Register("test.stop", "stops the crash test's process in step 2 (tests only)", func(ctx *dshctx.Context, _ noStopConfig) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, tools.Tool{
			Name: "stop", Description: "stops in step 2", Parameters: json.RawMessage(`{"type":"object"}`),
			Execute: func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
				var args struct{ N int }
				json.Unmarshal(c.Arguments, &args)
				if marker := os.Getenv(crashEnv); args.N == 2 && marker != "" {
					os.WriteFile(marker, nil, 0o600)
					for {
						time.Sleep(time.Hour)
					}
				}
				return tools.Result{Content: "passed"}, nil
			},
		})
	}, tools.Key)

	marker := os.Getenv(crashEnv)
	if marker == "" {
		return
	}
	cfg, err := config.Parse("crash.yaml", []byte(crashYAML(os.Getenv(crashURLEnv), os.Getenv(crashStreamEnv))), config.LoadOptions{Environ: []string{}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	a, _ := h.Agent("main")
	h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: "go"})
	a.WhenIdle(stdctx.Background())
	os.Exit(0)
}

// TestAKilledHostLosesAtMostTheStepInFlight: a dsh process on session.nats
// is SIGKILLed inside the second step's tool call. Once its lease runs
// out, another host resumes the session from JetStream: step 1 is whole,
// step 2's call is there, answered as interrupted, and the turn is closed.
func TestAKilledHostLosesAtMostTheStepInFlight(t *testing.T) {
	srv := startServer(t)
	stream := streamName()
	marker := filepath.Join(t.TempDir(), "stopped")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+marker, crashURLEnv+"="+srv.ClientURL(), crashStreamEnv+"="+stream)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dsh process never reached step 2's call; it said %q", out.String())
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	cfg, err := config.Parse("crash.yaml", []byte(crashYAML(srv.ClientURL(), stream)), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	var h *host.Host
	// The killed holder's lease (1 s) must run out first.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if h, err = hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()}); err == nil {
			break
		}
		if !errs.HasCode(err, session.SessionLocked) || time.Now().After(deadline) {
			t.Fatalf("resume after the kill: %v", err)
		}
	}
	defer h.Close(stdctx.Background())
	a, _ := h.Agent("main")
	var got []string
	for _, e := range a.Session().Events(1) {
		s := fmt.Sprintf("%s/%d", e.Type, e.Step)
		if e.Type == session.ToolResult {
			s += "=" + e.Message.Content
		}
		got = append(got, s)
	}
	// The prompt's admission record comes first, step 1's approval record
	// before its result; step 2's, in flight, was lost with the process.
	want := []string{"decision/0", "turn/start/0", "user/message/0",
		"step/start/1", "assistant/message/1", "tool/call/1", "decision/1", "tool/result/1=passed", "step/end/1",
		"step/start/2", "assistant/message/2", "tool/call/2", "tool/result/2=" + session.InterruptedResult,
		"turn/end/0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the resumed log is\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
