package host_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/internal/hosttest"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

// markConfig configures test.mark, an admission plugin that records which
// of its instances checked each message.
type markConfig struct {
	Label string `koanf:"label"`
	// ApplyDelay widens the moment a reload spends applying the entry, so
	// a host that lets messages pass meanwhile is caught.
	ApplyDelay time.Duration `koanf:"apply_delay"`
}

type markInstance struct {
	label    string
	disposed atomic.Bool
}

// checked maps message ids to the instance that checked them and whether
// it was still running then.
var checked sync.Map // string → markCheck

type markCheck struct {
	label  string
	active bool
}

func init() {
	plugin.Register("test.mark", "records which instance checked each message (tests only)",
		func(ctx *dshctx.Context, cfg markConfig) error {
			in := &markInstance{label: cfg.Label}
			if cfg.ApplyDelay > 0 {
				time.Sleep(cfg.ApplyDelay)
			}
			if _, err := ctx.OnDispose("mark disposed", func() error { in.disposed.Store(true); return nil }); err != nil {
				return err
			}
			_, err := agentcontroller.EventAdmission.On(ctx, func(c stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
				checked.Store(a.Message.ID, markCheck{label: in.label, active: !in.disposed.Load()})
				return next.Call(c, a)
			})
			return err
		})
}

const streamConfig = `
plugins:
  - use: llm.scripted
  - id: guard
    use: test.mark
    config: {label: %s, apply_delay: 20ms}
agents:
  - id: a
    provider: scripted
  - id: b
    provider: scripted
`

// TestReloadUnderDeliveriesLeavesNoneUnchecked replaces an admission entry
// while several senders deliver without pause: every message that entered
// an inbox was checked by a running instance of the configured entry.
func TestReloadUnderDeliveriesLeavesNoneUnchecked(t *testing.T) {
	checked.Clear()
	h := start(t, fmt.Sprintf(streamConfig, "v1"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	var failures []error
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
				id := []string{"a", "b"}[i%2]
				a, ok := h.Agent(id)
				if !ok {
					continue
				}
				mid, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: fmt.Sprintf("s%d-%d", i, n)})
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					ids = append(ids, mid)
				}
				mu.Unlock()
			}
		}()
	}
	countChecked := func(label string) int {
		n := 0
		checked.Range(func(_, v any) bool {
			if v.(markCheck).label == label {
				n++
			}
			return true
		})
		return n
	}
	waitUntil(t, "deliveries checked by v1", func() bool { return countChecked("v1") > 10 })
	for _, v := range []string{"v2", "v3"} {
		if err := h.Reload(stdctx.Background(), mustParse(t, fmt.Sprintf(streamConfig, v))); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "deliveries checked by "+v, func() bool { return countChecked(v) > 10 })
	}
	close(stop)
	wg.Wait()
	for _, id := range []string{"a", "b"} {
		if a, ok := h.Agent(id); ok {
			a.WhenIdle(stdctx.Background())
		}
	}
	if len(failures) > 0 {
		t.Fatalf("%d deliveries failed, first: %v", len(failures), failures[0])
	}
	unchecked := 0
	for _, id := range ids {
		c, ok := checked.Load(id)
		if !ok || !c.(markCheck).active {
			unchecked++
		}
	}
	if unchecked != 0 {
		t.Fatalf("%d of %d delivered messages passed without a running admission instance", unchecked, len(ids))
	}
	t.Logf("%d deliveries across two reloads, 0 unchecked", len(ids))
}

// waitUntil polls a condition the test has no signal for.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// stuck is a model whose stream ignores its context until unstuck closes,
// like a provider call that hangs.
type stuck struct {
	started chan struct{}
	once    sync.Once
	unstuck chan struct{}
}

// stuckModel is the model test.stuck registers; each test sets a fresh one
// before starting its host.
var stuckModel *stuck

func (s *stuck) Stream(stdctx.Context, llm.Request) (llm.Stream, error) {
	s.once.Do(func() { close(s.started) })
	return s, nil
}

func (s *stuck) Recv() (llm.Chunk, error) {
	<-s.unstuck
	return llm.Chunk{}, errors.New("stuck: released")
}

func (s *stuck) Close() error { return nil }

type stuckConfig struct{}

func init() {
	plugin.Register("test.stuck", "a model that hangs until the test lets go (tests only)",
		func(ctx *dshctx.Context, _ stuckConfig) error {
			svc, err := llm.Key.Get(ctx)
			if err != nil {
				return err
			}
			if stuckModel == nil {
				return errors.New("test.stuck: set stuckModel first")
			}
			return svc.Register(ctx, "stuck", stuckModel)
		}, llm.Key).ProvidesModel(func(stuckConfig) string { return "stuck" })
}

const stuckConfigText = `
plugins:
  - use: llm.scripted
  - use: test.stuck
agents:
  - id: hung
    provider: stuck
  - id: fine
    provider: scripted
`

// TestStuckAgentDoesNotBlockReloadOrClose: a reload leaves the opened
// agents to their sessions, so one whose turn never ends neither holds the
// reload up nor is replaced; the other agents keep running, and Close is
// not held up by the hung turn past its ctx once the turn lets go.
func TestStuckAgentDoesNotBlockReloadOrClose(t *testing.T) {
	stuckModel = &stuck{started: make(chan struct{}), unstuck: make(chan struct{})}
	cfg := mustParse(t, stuckConfigText)
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger(), StopTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hung, _ := h.Agent("hung")
	fine, _ := h.Agent("fine")
	if _, err := h.Controller().Deliver(stdctx.Background(), hung, agentcontroller.Request{Mode: agentcontroller.Followup, Content: "hang"}); err != nil {
		t.Fatal(err)
	}
	<-stuckModel.started
	changed := strings.ReplaceAll(stuckConfigText, "provider: stuck\n", "provider: stuck\n    model: other\n")
	changed = strings.ReplaceAll(changed, "provider: scripted\n", "provider: scripted\n    model: other\n")
	done := make(chan error, 1)
	go func() { done <- h.Reload(stdctx.Background(), mustParse(t, changed)) }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Reload waits forever for a stuck agent")
	}
	if err != nil {
		t.Fatalf("a reload must not touch the opened agents: %v", err)
	}
	if a, ok := h.Agent("hung"); !ok || a != hung || a.Status() == agents.StatusDisposed {
		t.Fatal("the reload replaced or stopped the hung agent")
	}
	if a, ok := h.Agent("fine"); !ok || a != fine {
		t.Fatal("the reload replaced or stopped the other agent")
	}
	close(stuckModel.unstuck)
	hung.WhenIdle(stdctx.Background())
	if err := h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
}

// blockConfig configures test.block, whose Apply waits for the test.
type blockConfig struct{}

var (
	blockEntered chan struct{}
	blockRelease chan struct{}
)

func init() {
	plugin.Register("test.block", "an Apply that hangs until the test lets go (tests only)",
		func(*dshctx.Context, blockConfig) error {
			blockEntered <- struct{}{}
			<-blockRelease
			return nil
		})
}

// TestCloseDoesNotWaitForAStuckReload: while a reload hangs in a plugin's
// Apply, the getters answer and Close returns within its own ctx.
func TestCloseDoesNotWaitForAStuckReload(t *testing.T) {
	blockEntered, blockRelease = make(chan struct{}, 1), make(chan struct{})
	h, err := host.Start(mustParse(t, reloadBase), host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	withBlock := strings.Replace(reloadBase, "agents:\n", "  - use: test.block\nagents:\n", 1)
	done := make(chan error, 1)
	go func() { done <- h.Reload(stdctx.Background(), mustParse(t, withBlock)) }()
	<-blockEntered
	h.Config()
	h.Config()
	h.PluginFiber("one")
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 100*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- h.Close(ctx) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waits for a stuck reload")
	}
	close(blockRelease)
	if err := <-done; !errs.HasCode(err, host.Closed) && !errs.HasCode(err, host.StartFailed) {
		t.Fatalf("the reload that outlived Close: %v", err)
	}
	// Let the tree's teardown, cut short by Close's ctx, finish.
	if err := h.Root().Dispose(stdctx.Background()); err != nil {
		t.Log(err)
	}
}

// TestReloadAfterCloseIsRefused: a closed host refuses with a stable code.
func TestReloadAfterCloseIsRefused(t *testing.T) {
	h, err := host.Start(mustParse(t, reloadBase), host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(stdctx.Background(), mustParse(t, reloadBase)); !errs.HasCode(err, host.Closed) {
		t.Fatalf("got %v", err)
	}
}
