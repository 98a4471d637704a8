package host_test

import (
	stdctx "context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/tools"
)

// ranTools counts the runs of test.calls' tools, by name.
var ranTools sync.Map // string → *atomic.Int64

type callsConfig struct{}

func init() {
	plugin.Register("test.calls", "tools that count their runs (tests only)",
		func(ctx *dshctx.Context, _ callsConfig) error {
			svc, err := tools.Key.Get(ctx)
			if err != nil {
				return err
			}
			for _, name := range []string{"danger", "risky", "safe"} {
				n, _ := ranTools.LoadOrStore(name, new(atomic.Int64))
				err := svc.Register(ctx, tools.Tool{Name: name, Description: "counts its runs",
					Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
						n.(*atomic.Int64).Add(1)
						return tools.Result{Content: "ran"}, nil
					}})
				if err != nil {
					return err
				}
			}
			return nil
		}, tools.Key)
}

// approvalStreamConfig denies danger by a policy.cel rule and risky by a
// tools.permission rule; every reload restarts both (their configs name
// the version), after an entry whose start is slow, so a host that lets
// calls through while it swaps has a wide window to be caught in.
const approvalStreamConfig = `
plugins:
  - use: llm.scripted
  - id: tools
    use: test.calls
  - id: slow
    use: test.mark
    config: {label: %[1]s, apply_delay: 20ms}
  - id: cel
    use: policy.cel
    config:
      params: {version: %[1]s}
      approval:
        - name: no-danger
          when: call.tool == "danger" && params.version != ""
          action: deny
          message: danger is off
  - id: perms
    use: tools.permission
    config: {deny: [risky, gone-%[1]s]}
agents:
  - id: a
    provider: scripted
`

// TestReloadUnderToolCallsLetsNoDeniedCallRun reloads a config with deny
// rules while several callers run tool calls without pause: no denied call
// ever runs, and every call is answered — run, or refused with a reason.
func TestReloadUnderToolCallsLetsNoDeniedCallRun(t *testing.T) {
	ranTools.Clear()
	h := start(t, fmt.Sprintf(approvalStreamConfig, "v1"))
	a, ok := h.Agent("a")
	if !ok {
		t.Fatal("agent a is not open")
	}
	svc, err := tools.Key.Get(a.Context())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls, answered, safeCalls, safeRan atomic.Int64
	var mu sync.Mutex
	var failures []string
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				name := []string{"danger", "risky", "safe"}[(i+n)%3]
				calls.Add(1)
				r, err := svc.Execute(stdctx.Background(), a.Context(), tools.Call{AgentID: "a", ID: fmt.Sprintf("c%d-%d", i, n), Name: name})
				fail := func(what string) {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s call: %s", name, what))
					mu.Unlock()
				}
				switch {
				case err != nil:
					fail("error " + err.Error())
					continue
				case name == "safe":
					safeCalls.Add(1)
					if r.IsError || r.Content != "ran" {
						fail("answered " + r.Content)
					} else {
						safeRan.Add(1)
					}
				case !r.IsError || !strings.Contains(r.Content, "was denied"):
					fail("answered " + r.Content)
				}
				answered.Add(1)
			}
		}()
	}
	waitUntil(t, "calls made under v1", func() bool { return calls.Load() > 30 })
	for _, v := range []string{"v2", "v3", "v4"} {
		if err := h.Reload(stdctx.Background(), mustParse(t, fmt.Sprintf(approvalStreamConfig, v))); err != nil {
			t.Fatal(err)
		}
		after := calls.Load()
		waitUntil(t, "calls made under "+v, func() bool { return calls.Load() > after+30 })
	}
	close(stop)
	wg.Wait()
	ran := func(name string) int64 {
		n, _ := ranTools.Load(name)
		return n.(*atomic.Int64).Load()
	}
	if d, r := ran("danger"), ran("risky"); d != 0 || r != 0 {
		t.Errorf("denied calls ran across reloads: danger %d times, risky %d times", d, r)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d calls were answered wrongly, first: %s", len(failures), calls.Load(), failures[0])
	}
	if answered.Load() != calls.Load() || safeRan.Load() != ran("safe") || safeRan.Load() != safeCalls.Load() {
		t.Errorf("%d calls, %d answered; safe: %d calls, %d ran by their answers, %d runs", calls.Load(), answered.Load(), safeCalls.Load(), safeRan.Load(), ran("safe"))
	}
	t.Logf("%d calls across three reloads", calls.Load())
}

// fragileBroken makes test.fragile fail to start.
var fragileBroken atomic.Bool

type fragileConfig struct {
	Version int `koanf:"version"`
}

func init() {
	plugin.Register("test.fragile", "an approval policy denying danger that fails to start when told (tests only)",
		func(ctx *dshctx.Context, _ fragileConfig) error {
			if fragileBroken.Load() {
				return fmt.Errorf("test.fragile: broken")
			}
			_, err := tools.EventApprove.On(ctx, func(c stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
				if a.Call.Name == "danger" {
					return tools.Verdict{Decision: tools.Deny, Reason: "danger is off", Source: "test.fragile"}, nil
				}
				return next.Call(c, a)
			})
			return err
		})
}

const fragileConfigText = `
plugins:
  - use: llm.scripted
  - id: tools
    use: test.calls
  - id: fragile
    use: test.fragile
    config: {version: %d}
agents:
  - id: a
    provider: scripted
`

// TestAReloadThatLosesAPolicyFailsClosed: a reload fails, and its rollback
// cannot restart the approval policy it stopped. Tool calls are refused —
// all of them, saying why — until a reload succeeds.
func TestAReloadThatLosesAPolicyFailsClosed(t *testing.T) {
	ranTools.Clear()
	fragileBroken.Store(false)
	t.Cleanup(func() { fragileBroken.Store(false) })
	h := start(t, fmt.Sprintf(fragileConfigText, 1))
	a, _ := h.Agent("a")
	svc, err := tools.Key.Get(a.Context())
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string) tools.Result {
		t.Helper()
		r, err := svc.Execute(stdctx.Background(), a.Context(), tools.Call{AgentID: "a", ID: "c-" + name, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ran := func(name string) int64 {
		n, _ := ranTools.Load(name)
		return n.(*atomic.Int64).Load()
	}
	if r := call("danger"); !r.IsError || !strings.Contains(r.Content, "danger is off") {
		t.Fatalf("before: %+v", r)
	}

	fragileBroken.Store(true)
	if err := h.Reload(stdctx.Background(), mustParse(t, fmt.Sprintf(fragileConfigText, 2))); err == nil {
		t.Fatal("a reload whose plugin fails to start succeeded")
	}
	for _, name := range []string{"danger", "safe"} {
		r := call(name)
		if !r.IsError || !strings.Contains(r.Content, "could not restore the plugins") || !strings.Contains(r.Content, "fragile") {
			t.Fatalf("%s after the reload lost the policy: %+v", name, r)
		}
	}
	if ran("danger") != 0 || ran("safe") != 0 {
		t.Fatal("a call ran while the approval stage lacked a policy")
	}
	// Admission is closed the same way: the lost plugin may have been an
	// admission policy.
	_, err = h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, RequestID: "closed", Content: "hello"})
	if ref, ok := agentcontroller.RefusalOf(err); !ok || ref.Reason != agentcontroller.ReasonHeld || !strings.Contains(err.Error(), "could not restore the plugins") {
		t.Fatalf("a message after the reload lost a plugin: %v; want a refusal naming the lost plugins", err)
	}

	fragileBroken.Store(false)
	if err := h.Reload(stdctx.Background(), mustParse(t, fmt.Sprintf(fragileConfigText, 3))); err != nil {
		t.Fatal(err)
	}
	if r := call("danger"); !r.IsError || !strings.Contains(r.Content, "danger is off") {
		t.Fatalf("danger after a good reload: %+v", r)
	}
	if r := call("safe"); r.IsError || ran("safe") != 1 {
		t.Fatalf("safe after a good reload: %+v", r)
	}
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, RequestID: "open", Content: "hello"}); err != nil {
		t.Fatalf("a message after a good reload: %v", err)
	}
}
