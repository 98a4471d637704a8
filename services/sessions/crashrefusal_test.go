package sessions_test

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/hosttest"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// The refusal crash test runs a real host with session.jsonl in a second
// process (this test binary, with refusalCrashEnv set): a turn blocks in
// a tool, a prompt sent meanwhile is refused, and once its sender has the
// answer the process is SIGKILLed, the turn still running. A host of the
// test's own then resumes the session, without the refusing check, and
// the retry of the refused request id must be answered from the log.
const (
	refusalCrashEnv = "DSH_SESSIONS_TEST_REFUSAL_CRASH" // the work dir
	refusalCrashHow = "DSH_SESSIONS_TEST_REFUSAL_CRASH_HOW"
)

// refusalCrashConfig is the host of both processes; refusing adds the
// admission check that turns "no" away, which only the first one has.
func refusalCrashConfig(work string, refusing bool) string {
	check := ""
	if refusing {
		check = "  - use: test.refuse-no\n"
	}
	return fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls:
            - {name: hold, arguments: '{}'}
        - text: "done"
  - use: test.refusal-crash
%s  - use: session.jsonl
    config: {dir: %q}
agents:
  - id: main
    provider: scripted
    session: s1
    workspace: %q
`, check, filepath.Join(work, "sessions"), work)
}

type noRefusalCrashConfig struct{}

func init() {
	plugin.Register("test.refusal-crash", "the hold tool of the refusal crash test (tests only)", func(ctx *dshctx.Context, _ noRefusalCrashConfig) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, tools.Tool{
			Name: "hold", Description: "holds the turn in the crash test's first process", Parameters: json.RawMessage(`{"type":"object"}`),
			Execute: func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
				if work := os.Getenv(refusalCrashEnv); work != "" {
					os.WriteFile(filepath.Join(work, "holding"), nil, 0o600)
					<-ctx.Done() // until the kill
				}
				return tools.Result{Content: "held"}, nil
			},
		})
	}, tools.Key)
	plugin.Register("test.refuse-no", "refuses the prompt \"no\" (tests only)", func(ctx *dshctx.Context, _ noRefusalCrashConfig) error {
		_, err := agentcontroller.EventAdmission.On(ctx, func(c stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			if a.Message.Content == "no" {
				return agentcontroller.Reject("test/no", "not now", false), nil
			}
			return next.Call(c, a)
		})
		return err
	})

	work := os.Getenv(refusalCrashEnv)
	if work == "" {
		return
	}
	// The first process: start the turn, have "no" refused while it
	// runs, say what its sender was answered, and wait for the kill.
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	cfg, err := config.Parse("crash.yaml", []byte(refusalCrashConfig(work, true)), config.LoadOptions{Environ: []string{}})
	if err != nil {
		fail(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		fail(err)
	}
	a, _ := h.Agent("main")
	ctx := stdctx.Background()
	if _, err := h.Controller().Deliver(ctx, a, agentcontroller.Request{Mode: agentcontroller.Followup, RequestID: "r1", Content: "go"}); err != nil {
		fail(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(work, "holding")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mode, content := agentcontroller.Followup, "no"
	how := os.Getenv(refusalCrashHow)
	if strings.HasSuffix(how, "steer") {
		mode = agentcontroller.Steer
	}
	if strings.HasPrefix(how, "queue-") {
		content = "later" // admitted: it waits behind the held turn
	}
	id, err := h.Controller().Deliver(ctx, a, agentcontroller.Request{Mode: mode, RequestID: "r2", Content: content})
	answer := agentcontroller.OutcomeOf(err)
	if err == nil {
		answer = "accepted " + id
	}
	// Renamed into place: the test must not read a file half written.
	os.WriteFile(filepath.Join(work, "answered.tmp"), []byte(answer), 0o600)
	os.Rename(filepath.Join(work, "answered.tmp"), filepath.Join(work, "answered"))
	for {
		time.Sleep(time.Hour) // not select{}: the runtime would end a process whose goroutines all block
	}
}

// TestARefusalAnsweredMidTurnSurvivesACrash: a prompt refused while a
// turn runs, its sender answered, then dsh killed before the turn ends.
// After the restart the refused request id is spent: its retry is
// answered "refused" from the log, with the first refusal's reason, not
// decided anew (the restarted host has no check that would refuse it).
func TestARefusalAnsweredMidTurnSurvivesACrash(t *testing.T) {
	for _, how := range []string{"followup", "steer"} {
		t.Run(how, func(t *testing.T) {
			work := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), refusalCrashEnv+"="+work, refusalCrashHow+"="+how)
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			var answered []byte
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
				var err error
				if answered, err = os.ReadFile(filepath.Join(work, "answered")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the first process never answered the refused prompt; it said %q", out.String())
				}
			}
			if string(answered) != agentcontroller.OutcomeRefused {
				t.Fatalf("the refused prompt's sender was told %q", answered)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()

			cfg, err := config.Parse("crash.yaml", []byte(refusalCrashConfig(work, false)), config.LoadOptions{Environ: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(stdctx.Background())
			a, _ := h.Agent("main")
			if in, ok := a.Session().Interrupted(); !ok || in.Turn != 1 {
				t.Fatalf("the resumed log left no turn interrupted: %+v %v", in, ok)
			}
			_, err = h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, RequestID: "r2", Content: "no"})
			e, _ := errors.AsType[*errs.Error](err)
			if agentcontroller.OutcomeOf(err) != agentcontroller.OutcomeRefused || e == nil || e.Reason != "test/no" || e.Details["recorded"] != true {
				t.Fatalf("the retry after the restart was answered %v", err)
			}
			decisions := 0
			for _, ev := range a.Session().Events(1) {
				if ev.Type == session.DecisionRecorded && ev.Decision.RequestID == "r2" {
					decisions++
				}
			}
			if decisions != 1 {
				t.Fatalf("request r2 has %d decision records", decisions)
			}
		})
	}
}

// TestAMessageQueuedMidTurnSurvivesACrash: a prompt accepted while a turn
// runs (held in a tool), its sender answered with its message id, then
// dsh killed before the turn ends. The log held it as queued before the
// answer; the restarted host resumes the session and runs it once, in a
// turn of its own, and a retry of its request id is answered with the
// same message id without a second delivery.
func TestAMessageQueuedMidTurnSurvivesACrash(t *testing.T) {
	for _, how := range []string{"queue-followup", "queue-steer"} {
		t.Run(how, func(t *testing.T) {
			work := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), refusalCrashEnv+"="+work, refusalCrashHow+"="+how)
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			var answered []byte
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
				var err error
				if answered, err = os.ReadFile(filepath.Join(work, "answered")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the first process never answered the queued prompt; it said %q", out.String())
				}
			}
			msgID, ok := strings.CutPrefix(string(answered), "accepted ")
			if !ok {
				t.Fatalf("the queued prompt's sender was told %q", answered)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()

			cfg, err := config.Parse("crash.yaml", []byte(refusalCrashConfig(work, false)), config.LoadOptions{Environ: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(stdctx.Background())
			a, _ := h.Agent("main")
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
			defer cancel()
			// The resume queued it again: its turn runs with no retry.
			for {
				if ev, ok := a.Session().Outcome("r2"); ok && ev.Type == session.UserMessage {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("r2 never ran after the restart: %+v", a.Session().Events(1))
				}
				time.Sleep(5 * time.Millisecond)
			}
			id, err := h.Controller().Deliver(ctx, a, agentcontroller.Request{Mode: agentcontroller.Followup, RequestID: "r2", Content: "later"})
			if err != nil || id != msgID {
				t.Fatalf("the retry after the restart was answered %q, %v; want the first answer's %q", id, err, msgID)
			}
			if err := a.WhenIdle(ctx); err != nil {
				t.Fatal(err)
			}
			var queued, delivered int
			for _, ev := range a.Session().Events(1) {
				if ev.RequestID != "r2" {
					continue
				}
				switch ev.Type {
				case session.MessageQueued:
					queued++
				case session.UserMessage:
					delivered++
					if ev.Turn != 2 || ev.Message.ID != msgID {
						t.Fatalf("r2 ran in turn %d as message %q; want turn 2 as %q", ev.Turn, ev.Message.ID, msgID)
					}
				default:
					t.Fatalf("r2 has a %s event", ev.Type)
				}
			}
			if queued != 1 || delivered != 1 {
				t.Fatalf("r2 is queued %d and delivered %d times; want once each", queued, delivered)
			}
		})
	}
}
