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
