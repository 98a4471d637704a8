package jsonl_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	_ "github.com/dsh-go/dsh/plugins/tools/files"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// The crash test runs a real host with session.jsonl in a second process
// (this test binary, with crashEnv set), stops that process at a chosen
// point of a multi-step turn, SIGKILLs it there, resumes the session in a
// host of its own and checks the log against the workspace.
//
// The turn has crashSteps steps that each write k<step>.txt and call
// "gate", then a final answer. The process stops at one point, where it
// creates the file "stopped" and blocks:
//
//	request:N  before step N's model call: the boundary after step N-1
//	result:N   step N's model answered, its message not yet recorded
//	tool:N     inside step N's gate call, after its write ran
//	cont:N     step N's calls answered, its end not yet recorded
const (
	crashEnv   = "DSH_JSONL_TEST_CRASH" // the work dir
	crashAtEnv = "DSH_JSONL_TEST_CRASH_AT"
	crashSteps = 3
)

func crashConfig(work string) string {
	var replies strings.Builder
	for s := 1; s <= crashSteps; s++ {
		fmt.Fprintf(&replies, "        - text: \"step %d. \"\n          tool_calls:\n"+
			"            - {name: write, arguments: '{\"path\":\"k%d.txt\",\"content\":\"%d\"}'}\n"+
			"            - {name: gate, arguments: '{\"step\":%d}'}\n", s, s, s, s)
	}
	replies.WriteString("        - text: \"done\"\n")
	return fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
%s  - use: tools.files
  - use: test.crashpoint
  - use: session.jsonl
    config: {dir: %q}
agents:
  - id: main
    provider: scripted
    session: s1
    workspace: %q
`, replies.String(), filepath.Join(work, "sessions"), filepath.Join(work, "ws"))
}

// crashPoint is where the helper process stops; empty in the test itself.
var crashPoint = os.Getenv(crashAtEnv)

// stopAt blocks for good when point is the one to stop at, after saying so
// in the file the test waits for.
func stopAt(point string) {
	if point != crashPoint {
		return
	}
	os.WriteFile(filepath.Join(os.Getenv(crashEnv), "stopped"), []byte(point), 0o600)
	// Sleeping, not select{}: with every goroutine blocked the runtime
	// would end the process itself, before the test kills it.
	for {
		time.Sleep(time.Hour)
	}
}

type noCrashConfig struct{}

func init() {
	plugin.Register("test.crashpoint", "stops the crash test's dsh process at a chosen point (tests only)", func(ctx *dshctx.Context, _ noCrashConfig) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		if err := svc.Register(ctx, tools.Tool{
			Name: "gate", Description: "stops the crash test's process", Parameters: json.RawMessage(`{"type":"object"}`),
			// Not parallel-safe: it runs after the step's write, never
			// beside it.
			Execute: func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
				var args struct{ Step int }
				json.Unmarshal(c.Arguments, &args)
				stopAt(fmt.Sprintf("tool:%d", args.Step))
				return tools.Result{Content: "passed"}, nil
			},
		}); err != nil {
			return err
		}
		if _, err := agentloop.EventRequest.On(ctx, func(c stdctx.Context, e agentloop.RequestEvent, next agentloop.RequestNext) (llm.Request, error) {
			stopAt(fmt.Sprintf("request:%d", e.Step))
			return next.Call(c, e)
		}); err != nil {
			return err
		}
		if _, err := agentloop.EventStepResult.On(ctx, func(c stdctx.Context, r agentloop.StepResult, next agentloop.StepResultNext) (agentloop.StepResult, error) {
			stopAt(fmt.Sprintf("result:%d", r.Step))
			return next.Call(c, r)
		}); err != nil {
			return err
		}
		_, err = agentloop.EventContinuation.On(ctx, func(c stdctx.Context, e agentloop.Continuation, next agentloop.ContinuationNext) (bool, error) {
			stopAt(fmt.Sprintf("cont:%d", e.Step))
			return next.Call(c, e)
		})
		return err
	}, tools.Key)

	work := os.Getenv(crashEnv)
	if work == "" {
		return
	}
	// The helper process: run the turn until stopAt blocks it.
	cfg, err := config.Parse("crash.yaml", []byte(crashConfig(work)), config.LoadOptions{Environ: []string{}})
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
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: "go"}); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	a.WhenIdle(stdctx.Background())
	h.Close(stdctx.Background())
	os.Exit(0)
}

// crashPoints are the kill points of the short run; DSH_JSONL_CRASH_ALL=1
// takes every point of every step, DSH_JSONL_CRASH_N=k each k times.
func crashPoints() []string {
	if os.Getenv("DSH_JSONL_CRASH_ALL") == "" && os.Getenv("DSH_JSONL_CRASH_N") == "" {
		return []string{"request:3", "result:2", "tool:3", "cont:1"}
	}
	var all []string
	for s := 1; s <= crashSteps; s++ {
		for _, p := range []string{"request", "result", "tool", "cont"} {
			all = append(all, fmt.Sprintf("%s:%d", p, s))
		}
	}
	return all
}

// TestCrashLosesAtMostTheStepInFlight kills dsh at step boundaries and
// inside steps, resumes, and checks that every completed step is in the
// log once, that the step in flight is closed with its open calls answered
// as interrupted, and that the files in the workspace are those the log
// says were written.
func TestCrashLosesAtMostTheStepInFlight(t *testing.T) {
	n := 1
	if v, err := strconv.Atoi(os.Getenv("DSH_JSONL_CRASH_N")); err == nil && v > 0 {
		n = v
	}
	var kills, resumes []time.Duration
	for _, point := range crashPoints() {
		for i := range n {
			t.Run(fmt.Sprintf("%s#%d", point, i), func(t *testing.T) {
				kill, resume := crashAndResume(t, point)
				kills, resumes = append(kills, kill), append(resumes, resume)
			})
		}
	}
	if n > 1 || os.Getenv("DSH_JSONL_CRASH_ALL") != "" {
		t.Logf("%d kills; stop-to-killed median %s; resume median %s, max %s", len(kills), median(kills), median(resumes), slicesMax(resumes))
	}
}

func crashAndResume(t *testing.T, point string) (kill, resume time.Duration) {
	work := t.TempDir()
	os.Mkdir(filepath.Join(work, "ws"), 0o700)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+work, crashAtEnv+"="+point)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	stopped := filepath.Join(work, "stopped")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(stopped); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dsh process never reached %s; it said %q", point, out.String())
		}
	}
	t0 := time.Now()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	kill = time.Since(t0)

	t0 = time.Now()
	cfg, err := config.Parse("crash.yaml", []byte(crashConfig(work)), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatalf("resume after a kill at %s: %v", point, err)
	}
	resume = time.Since(t0)
	defer h.Close(stdctx.Background())
	a, _ := h.Agent("main")
	checkCrashLog(t, point, a.Session().Events(1), filepath.Join(work, "ws"))
	return kill, resume
}

// checkCrashLog checks a resumed log against the kill point and the
// workspace.
func checkCrashLog(t *testing.T, point string, evs []session.Event, ws string) {
	t.Helper()
	kind, num, _ := strings.Cut(point, ":")
	step, _ := strconv.Atoi(num)
	dump := func() string {
		var b strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&b, "\n  %d %s step %d", e.Seq, e.Type, e.Step)
			if e.Message != nil {
				fmt.Fprintf(&b, " %q %s", e.Message.Content, e.Message.ToolCallID)
			}
		}
		return b.String()
	}
	messages := map[int]int{} // assistant messages by step
	ends := map[int]int{}
	// Calls and results by step and call id: a model may reuse ids in
	// another message, the scripted one does.
	results := map[string]string{}
	calls := map[string]string{} // call -> the file it writes
	for _, e := range evs {
		switch e.Type {
		case session.AssistantMessage:
			messages[e.Step]++
			for _, c := range e.Message.ToolCalls {
				var args struct{ Path string }
				json.Unmarshal([]byte(c.Arguments), &args)
				calls[fmt.Sprintf("%d/%s", e.Step, c.ID)] = args.Path
			}
		case session.ToolResult:
			id := fmt.Sprintf("%d/%s", e.Step, e.Message.ToolCallID)
			if _, twice := results[id]; twice {
				t.Fatalf("kill at %s: call %s answered twice:%s", point, id, dump())
			}
			results[id] = e.Message.Content
		case session.StepEnd:
			ends[e.Step]++
		}
	}
	// Steps before the one in flight are whole, and there once.
	for s := 1; s < step; s++ {
		if messages[s] != 1 || ends[s] != 1 {
			t.Fatalf("kill at %s: completed step %d has %d messages and %d ends:%s", point, s, messages[s], ends[s], dump())
		}
	}
	// The step in flight: its message is kept once the model's answer was
	// recorded before its calls ran; it never ended.
	recorded := kind == "tool" || kind == "cont"
	if want := map[bool]int{true: 1, false: 0}[recorded]; messages[step] != want || ends[step] != 0 {
		t.Fatalf("kill at %s: the step in flight has %d messages (want %d) and %d ends:%s", point, messages[step], want, ends[step], dump())
	}
	for s := step + 1; s <= crashSteps+1; s++ {
		if messages[s] != 0 {
			t.Fatalf("kill at %s: step %d, after the kill, is in the log:%s", point, s, dump())
		}
	}
	// Every call has one result; those of the step in flight say it was
	// interrupted, the others are real.
	interrupted := 0
	for id := range calls {
		r, ok := results[id]
		if !ok {
			t.Fatalf("kill at %s: call %s has no result:%s", point, id, dump())
		}
		if r == session.InterruptedResult {
			interrupted++
		}
	}
	// A call is checkpointed as it starts: the write of the step in
	// flight has its real result, only the gate is interrupted.
	if want := map[bool]int{true: 1, false: 0}[recorded]; interrupted != want {
		t.Fatalf("kill at %s: %d calls answered as interrupted, want %d:%s", point, interrupted, want, dump())
	}
	last := evs[len(evs)-1]
	if last.Type != session.TurnEnd || last.Reason != session.ReasonInterrupted {
		t.Fatalf("kill at %s: the log ends with %s %q:%s", point, last.Type, last.Reason, dump())
	}
	// The workspace and the log agree: a file exists exactly when a call
	// that writes it is in the log, and one with a real result wrote it.
	// The write of the step in flight ran before the kill at tool and
	// cont, and is in the log with an interrupted result.
	var files []string
	entries, _ := os.ReadDir(ws)
	for _, e := range entries {
		files = append(files, e.Name())
	}
	var logged []string
	for id, path := range calls {
		if path != "" {
			logged = append(logged, path)
			if results[id] != session.InterruptedResult && !strings.Contains(results[id], "wrote") && !strings.Contains(results[id], path) {
				t.Fatalf("kill at %s: the write of %s answered %q", point, path, results[id])
			}
		}
	}
	sort.Strings(files)
	sort.Strings(logged)
	if strings.Join(files, ",") != strings.Join(logged, ",") {
		t.Fatalf("kill at %s: the workspace holds %v, the log has writes of %v:%s", point, files, logged, dump())
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func slicesMax(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
