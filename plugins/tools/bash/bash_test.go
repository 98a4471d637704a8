//go:build linux

package bash_test

import (
	"bufio"
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/internal/sandbox"
	"github.com/dsh-go/dsh/plugins/tools/bash"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// agent applies tools.bash with cfg and returns a caller of its tool and
// what the plugin logged.
type agent struct {
	t    *testing.T
	root *dshctx.Context
	svc  *tools.Service
	log  *bytes.Buffer
	ws   string
}

func start(t *testing.T, cfg bash.Config) *agent {
	t.Helper()
	log := &bytes.Buffer{}
	root := dshctx.New(dshctx.WithLogger(hclog.New(&hclog.LoggerOptions{Output: log, Level: hclog.Info})))
	ctxtest.Cleanup(t, root)
	for _, p := range []struct {
		plugin any
		cfg    any
	}{{tools.Plugin, nil}, {protect.Plugin, nil}, {bash.Plugin, cfg}} {
		f, err := root.Plugin(p.plugin.(dshctx.Plugin), p.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// These tests are about running commands, not approving them: bash
	// asks by default, and nobody is attached here to answer.
	tools.EventApprove.On(root, func(stdctx.Context, tools.Approval, tools.ApproveNext) (tools.Verdict, error) {
		return tools.Verdict{Decision: tools.Allow}, nil
	})
	svc, err := tools.Key.Get(root)
	if err != nil {
		t.Fatal(err)
	}
	return &agent{t: t, root: root, svc: svc, log: log, ws: t.TempDir()}
}

// defaults is the default config with the given changes.
func defaults(change func(*bash.Config)) bash.Config {
	c := bash.Config{}.Defaults()
	if change != nil {
		change(&c)
	}
	return c
}

// open is the config of most tests: no sandbox, so they run anywhere.
func open(change func(*bash.Config)) bash.Config {
	return defaults(func(c *bash.Config) {
		c.Sandbox.Mode = bash.ModeOff
		if change != nil {
			change(c)
		}
	})
}

func (a *agent) run(ctx stdctx.Context, command string, extra ...string) tools.Result {
	a.t.Helper()
	args := map[string]any{"command": command}
	if len(extra) == 2 {
		n, _ := strconv.Atoi(extra[1])
		args[extra[0]] = n
	}
	raw, _ := json.Marshal(args)
	r, err := a.svc.Execute(ctx, a.root, tools.Call{ID: "c1", Name: "bash", Arguments: raw, Workspace: a.ws})
	if err != nil {
		a.t.Fatalf("a bash call must end in a result, not %v", err)
	}
	return r
}

func TestTheToolIsExclusiveAndAsksByDefault(t *testing.T) {
	a := start(t, open(nil))
	tool := a.svc.Lookup(a.root, "bash")
	if tool == nil || tool.ParallelSafe || tool.Approval != tools.Ask {
		t.Fatalf("bash must be registered, exclusive and ask: %+v", tool)
	}
	var schema struct {
		Properties map[string]struct {
			Maximum int `json:"maximum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(tool.Parameters, &schema); err != nil || schema.Properties["timeout"].Maximum != 600 || schema.Required[0] != "command" {
		t.Fatalf("schema %s: %v", tool.Parameters, err)
	}
	for _, limit := range []string{"2m0s", "10m0s", "30000 bytes", "No sandbox"} {
		if !strings.Contains(tool.Description, limit) {
			t.Errorf("the description does not state %q: %s", limit, tool.Description)
		}
	}
}

func TestAnExitCodeIsReportedWithTheOutputInOrder(t *testing.T) {
	a := start(t, open(nil))
	r := a.run(t.Context(), "echo out; echo err >&2; echo again; exit 3")
	if !r.IsError || r.Content != "out\nerr\nagain\nexit code: 3" {
		t.Fatalf("got %+v", r)
	}
	r = a.run(t.Context(), "true")
	if r.IsError || r.Content != "(no output)\nexit code: 0" {
		t.Fatalf("got %+v", r)
	}
}

func TestTheCommandRunsInTheWorkspace(t *testing.T) {
	a := start(t, open(nil))
	r := a.run(t.Context(), "pwd -P")
	want, _ := filepath.EvalSymlinks(a.ws)
	if r.IsError || !strings.HasPrefix(r.Content, want+"\n") {
		t.Fatalf("want %s, got %+v", want, r)
	}
	a.ws = filepath.Join(a.ws, "missing")
	if r := a.run(t.Context(), "true"); !r.IsError || !strings.Contains(r.Content, "workspace") {
		t.Fatalf("a missing workspace must be an error result: %+v", r)
	}
}

func TestLongOutputKeepsItsHeadAndTail(t *testing.T) {
	a := start(t, open(func(c *bash.Config) { c.MaxOutputBytes = 1000 }))
	r := a.run(t.Context(), `printf BEGIN; head -c 10000 /dev/zero | tr '\0' x; printf END`)
	// 5 + 10000 + 3 bytes, 1000 kept.
	if !strings.HasPrefix(r.Content, "BEGIN") || !strings.Contains(r.Content, "END\nexit code: 0") ||
		!strings.Contains(r.Content, "[... 9008 bytes of output cut here: the first 500 and the last 500 bytes are shown ...]") {
		t.Fatalf("got %q", r.Content)
	}
}

func TestACallOutsideTheLimitsIsAnErrorResult(t *testing.T) {
	a := start(t, open(nil))
	if r := a.run(t.Context(), "true", "timeout", "601"); !r.IsError || !strings.Contains(r.Content, "600") { // the schema check or the tool's own
		t.Fatalf("got %+v", r)
	}
	if r := a.run(t.Context(), ""); !r.IsError || !strings.Contains(r.Content, "command") {
		t.Fatalf("got %+v", r)
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// waitGone waits for pid to die: SIGKILL is delivered asynchronously, so
// a process of the killed group may still be exiting when the call
// returns.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) outlived its command", what, pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// firstPID reads the pid a command printed on its first line.
func firstPID(t *testing.T, out string) int {
	t.Helper()
	line, _ := bufio.NewReader(strings.NewReader(out)).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("no pid first in %q", out)
	}
	return pid
}

// TestATimeoutKillsTheWholeGroup: a background sleep holding the output
// pipe is gone when the call returns.
func TestATimeoutKillsTheWholeGroup(t *testing.T) {
	a := start(t, open(func(c *bash.Config) { c.Timeout = 300 * time.Millisecond }))
	r := a.run(t.Context(), "sleep 300 & echo $!; sleep 300")
	if !r.IsError || !strings.HasSuffix(r.Content, "timed out after 300ms: the command and every process it started were killed") {
		t.Fatalf("got %+v", r)
	}
	waitGone(t, firstPID(t, r.Content), "the background sleep")
}

// TestBackgroundProcessesEndWithTheCommand: a command that exits at once
// leaves nothing running, and its result does not wait for the child
// holding its output.
func TestBackgroundProcessesEndWithTheCommand(t *testing.T) {
	a := start(t, open(nil))
	r := a.run(t.Context(), "sleep 300 & echo $!")
	if r.IsError || !strings.HasSuffix(r.Content, "exit code: 0") {
		t.Fatalf("got %+v", r)
	}
	waitGone(t, firstPID(t, r.Content), "the background sleep")
}

func TestCancelKillsTheCommandAtOnce(t *testing.T) {
	a := start(t, open(nil))
	ctx, cancel := stdctx.WithCancel(t.Context())
	done := make(chan tools.Result, 1)
	go func() { done <- a.run(ctx, "sleep 300 & echo $! > bg; wait") }()
	bg := filepath.Join(a.ws, "bg")
	var pid int
	deadline := time.After(30 * time.Second)
	for pid == 0 {
		b, _ := os.ReadFile(bg)
		if strings.HasSuffix(string(b), "\n") {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		select {
		case r := <-done:
			t.Fatalf("the command ended before it reported its background job: %+v", r)
		case <-deadline:
			t.Fatal("the command never reported its background job's pid")
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	r := <-done
	if !r.IsError || !strings.Contains(r.Content, "cancelled") {
		t.Fatalf("got %+v", r)
	}
	waitGone(t, pid, "the background sleep")
}

func TestTheEnvironmentIsMinimal(t *testing.T) {
	for _, k := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY"} {
		t.Setenv(k, "sk-secret")
	}
	t.Setenv("PASS_ME", "p")
	a := start(t, open(func(c *bash.Config) {
		c.Env = map[string]string{"MINE": "1", "TMPDIR": "/elsewhere"}
		c.EnvPassthrough = []string{"PASS_ME"}
	}))
	r := a.run(t.Context(), "env; test -d \"$TMPDIR\" && echo tmpdir-ok")
	if strings.Contains(r.Content, "sk-secret") || strings.Contains(r.Content, "API_KEY") {
		t.Fatalf("a provider key reached bash:\n%s", r.Content)
	}
	for _, want := range []string{"MINE=1\n", "PASS_ME=p\n", "PATH=" + os.Getenv("PATH") + "\n", "tmpdir-ok"} {
		if !strings.Contains(r.Content, want) {
			t.Errorf("the environment lacks %q:\n%s", want, r.Content)
		}
	}
	tmp := envValue(r.Content, "TMPDIR")
	if tmp == "/elsewhere" || !strings.HasPrefix(filepath.Base(tmp), "dsh-bash-") {
		t.Fatalf("TMPDIR must be the command's own temp dir, got %q", tmp)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command's temp dir %s outlived it: %v", tmp, err)
	}
}

func envValue(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			return v
		}
	}
	return ""
}

func TestAnInvalidConfigIsRefused(t *testing.T) {
	for _, c := range []bash.Config{
		open(func(c *bash.Config) { c.Timeout = 0 }),
		open(func(c *bash.Config) { c.MaxTimeout = time.Second }),
		open(func(c *bash.Config) { c.MaxOutputBytes = 10 }),
		open(func(c *bash.Config) { c.Sandbox.Mode = "docker" }),
		open(func(c *bash.Config) { c.Sandbox.Unavailable = "ignore" }),
		open(func(c *bash.Config) { c.Sandbox.Writable = []string{"relative"} }),
	} {
		if c.Validate() == nil {
			t.Errorf("accepted %+v", c)
		}
	}
	if err := (bash.Config{}).Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
}

// --- the sandbox ---

// landlocked returns the default config (Landlock, network off) and
// skips only where this kernel truly lacks Landlock.
func landlocked(t *testing.T, change func(*bash.Config)) bash.Config {
	t.Helper()
	if st := sandbox.Probe(); !st.Available() {
		t.Skipf("this kernel has no Landlock: %s", st.Reason)
	}
	return defaults(change)
}

func TestTheSandboxConfinesWritesToTheWorkspaceAndTMPDIR(t *testing.T) {
	a := start(t, landlocked(t, nil))
	outside := t.TempDir()
	r := a.run(t.Context(), fmt.Sprintf(`echo in > inside && echo tmp > "$TMPDIR/t" && cat "$TMPDIR/t"
echo out > %s/x || echo refused`, outside))
	if r.IsError || !strings.Contains(r.Content, "tmp\n") || !strings.Contains(r.Content, "refused") {
		t.Fatalf("got %+v", r)
	}
	if _, err := os.Stat(filepath.Join(a.ws, "inside")); err != nil {
		t.Fatalf("a write inside the workspace did not land: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a write outside the workspace landed: %v", err)
	}
	if !strings.Contains(a.log.String(), "sandbox: namespaces") || !strings.Contains(a.log.String(), "Landlock ABI") {
		t.Fatalf("the sandbox in force was not logged at info:\n%s", a.log)
	}
}

func TestTheSandboxAddsTheConfiguredWritableDirectories(t *testing.T) {
	extra := t.TempDir()
	a := start(t, landlocked(t, func(c *bash.Config) { c.Sandbox.Writable = []string{extra} }))
	if r := a.run(t.Context(), "echo x > "+extra+"/y"); r.IsError {
		t.Fatalf("got %+v", r)
	}
}

func listen(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

func TestTheNetworkFollowsTheConfig(t *testing.T) {
	port := listen(t)
	dial := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo connected`, port)
	closed := start(t, landlocked(t, nil))
	if st := sandbox.Probe(); st.ABI < 4 {
		t.Skipf("this kernel cannot restrict TCP (ABI %d)", st.ABI)
	}
	if r := closed.run(t.Context(), dial); !r.IsError || strings.Contains(r.Content, "connected") {
		t.Fatalf("network: false let a TCP connect through: %+v", r)
	}
	opened := start(t, landlocked(t, func(c *bash.Config) { c.Sandbox.Network = true }))
	if r := opened.run(t.Context(), dial); r.IsError || !strings.Contains(r.Content, "connected") {
		t.Fatalf("network: true refused a TCP connect: %+v", r)
	}
}

// TestWithoutLandlockRefuseAnswersEveryCall: a kernel without Landlock
// (simulated) and the default unavailable: refuse.
func TestWithoutLandlockRefuseAnswersEveryCall(t *testing.T) {
	defer bash.SetProbe(sandbox.Status{Reason: "simulated: not enabled at boot", NSReason: "simulated: not enabled at boot"})()
	a := start(t, defaults(nil))
	r := a.run(t.Context(), "touch ran")
	if !r.IsError || !strings.Contains(r.Content, "simulated: not enabled at boot") || !strings.Contains(r.Content, "sandbox.unavailable: warn") {
		t.Fatalf("got %+v", r)
	}
	if _, err := os.Stat(filepath.Join(a.ws, "ran")); err == nil {
		t.Fatal("the command ran although the sandbox was unavailable")
	}
	if !strings.Contains(a.log.String(), "every command is refused") {
		t.Fatalf("the refusal was not logged at start:\n%s", a.log)
	}
	if tool := a.svc.Lookup(a.root, "bash"); !strings.Contains(tool.Description, "refused") {
		t.Fatalf("the description must tell the model: %s", tool.Description)
	}
}

// TestWithoutLandlockWarnRunsAndSaysSoOnce: unavailable: warn runs the
// command, logs a warning at start and states it in the first result only.
func TestWithoutLandlockWarnRunsAndSaysSoOnce(t *testing.T) {
	defer bash.SetProbe(sandbox.Status{Reason: "simulated", NSReason: "simulated"})()
	a := start(t, defaults(func(c *bash.Config) { c.Sandbox.Unavailable = bash.Warn }))
	first := a.run(t.Context(), "echo ran")
	if first.IsError || !strings.HasPrefix(first.Content, "warning: NO sandbox") || !strings.Contains(first.Content, "ran\n") {
		t.Fatalf("got %+v", first)
	}
	if second := a.run(t.Context(), "echo ran"); strings.Contains(second.Content, "warning") {
		t.Fatalf("the warning must come once: %+v", second)
	}
	if n := strings.Count(a.log.String(), "NO sandbox"); n != 1 {
		t.Fatalf("want one warning logged, got %d:\n%s", n, a.log)
	}
}

// TestAnOldABIWithWarnKeepsTheFilesConfined: ABI 3 cannot close the
// network; warn runs with the file rules still enforced and says the
// network is open.
func TestAnOldABIWithWarnKeepsTheFilesConfined(t *testing.T) {
	if st := sandbox.Probe(); st.ABI < 3 {
		t.Skipf("needs Landlock ABI 3; this kernel has %d", st.ABI)
	}
	defer bash.SetProbe(sandbox.Status{ABI: 3})()
	a := start(t, defaults(func(c *bash.Config) { c.Sandbox.Unavailable = bash.Warn }))
	outside := t.TempDir()
	r := a.run(t.Context(), "echo x > "+outside+"/x || echo refused")
	if !strings.Contains(r.Content, "network NOT restricted") || !strings.Contains(r.Content, "refused") {
		t.Fatalf("got %+v", r)
	}
}

func TestModeOffWritesAnywhere(t *testing.T) {
	a := start(t, open(nil))
	outside := t.TempDir()
	if r := a.run(t.Context(), "echo x > "+outside+"/x"); r.IsError {
		t.Fatalf("got %+v", r)
	}
	if !strings.Contains(a.log.String(), "sandbox off") {
		t.Fatalf("mode: off must be logged:\n%s", a.log)
	}
}

// TestAnEscapedProcessDoesNotHoldTheResult: a process that left the group
// (setsid) keeps the output pipe open; the result comes anyway, within the
// kill grace, and says output may be missing.
func TestAnEscapedProcessDoesNotHoldTheResult(t *testing.T) {
	a := start(t, open(nil))
	// The command ends once the escape is done: the shell in the new
	// session wrote its pid.
	r := a.run(t.Context(), `setsid sh -c 'echo $$ > esc; exec sleep 300' & while [ ! -s esc ]; do sleep 0.01; done; cat esc`)
	escaped := firstPID(t, r.Content)
	t.Cleanup(func() { syscall.Kill(escaped, syscall.SIGKILL) })
	if !strings.Contains(r.Content, "left the command's process group") || !strings.HasSuffix(r.Content, "exit code: 0") {
		t.Fatalf("got %+v", r)
	}
}

// TestASandboxThatCannotBeEnteredRunsNothing: the plugin believes the
// kernel offers an ABI it lacks; the child refuses to run the command
// less confined, and the result says so.
func TestASandboxThatCannotBeEnteredRunsNothing(t *testing.T) {
	if st := sandbox.Probe(); !st.Available() || st.ABI >= 11 {
		t.Skipf("needs a kernel with Landlock below ABI 11 (%s)", st)
	}
	st := sandbox.Probe()
	st.ABI = 11
	defer bash.SetProbe(st)()
	a := start(t, defaults(nil))
	r := a.run(t.Context(), "touch ran")
	if !r.IsError || !strings.Contains(r.Content, "could not enter the sandbox") {
		t.Fatalf("got %+v", r)
	}
	if _, err := os.Stat(filepath.Join(a.ws, "ran")); err == nil {
		t.Fatal("the command ran outside the sandbox it was promised")
	}
}

func TestDescribeSaysWhichSandboxIsInForce(t *testing.T) {
	st := sandbox.Probe()
	st.ABI = 7
	defer bash.SetProbe(st)()
	line, err := bash.Describe(defaults(nil))
	if err != nil || !strings.Contains(line, "Landlock ABI 7") || !strings.Contains(line, "network off") {
		t.Fatalf("%q %v", line, err)
	}
	bash.SetProbe(sandbox.Status{Reason: "simulated"})
	if line, _ := bash.Describe(defaults(nil)); !strings.Contains(line, "refused") {
		t.Fatalf("%q", line)
	}
	if line, _ := bash.Describe(open(nil)); !strings.Contains(line, "sandbox off") {
		t.Fatalf("%q", line)
	}
	if _, err := bash.Describe(open(func(c *bash.Config) { c.Timeout = 0 })); err == nil {
		t.Fatal("an invalid config must be an error")
	}
}
