package approval_test

import (
	stdctx "context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func always(c approval.Choice) approval.Answerer {
	return func(stdctx.Context, approval.Request) (approval.Answer, error) {
		return approval.Answer{Choice: c, Reason: "because"}, nil
	}
}

func req(tool, pattern string) approval.Request {
	return approval.Request{AgentID: "a", Tool: tool, Pattern: pattern}
}

func TestAttachOnePerAgent(t *testing.T) {
	var s approval.Service
	detach, err := s.Attach("a", always(approval.AllowOnce))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Attach("a", always(approval.Deny))
	if !errs.HasCode(err, approval.AnswererAttached) {
		t.Fatalf("second attach: %v", err)
	}
	if e, _ := errors.AsType[*errs.Error](err); e == nil || !strings.Contains(e.Message, `"a"`) {
		t.Fatalf("the error must name the agent: %v", err)
	}
	if _, err := s.Attach("b", always(approval.Deny)); err != nil {
		t.Fatalf("another agent's answerer: %v", err)
	}
	detach()
	detach() // idempotent
	again, err := s.Attach("a", always(approval.Deny))
	if err != nil {
		t.Fatalf("attach after detach: %v", err)
	}
	detach() // a stale detach must not remove the new answerer
	if ans, err := s.Ask(stdctx.Background(), req("x", "")); err != nil || ans.Choice != approval.Deny {
		t.Fatalf("the new answerer must answer: %+v %v", ans, err)
	}
	again()
	if _, err := s.Attach("", always(approval.Deny)); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("empty id: %v", err)
	}
	if _, err := s.Attach("c", nil); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("nil answerer: %v", err)
	}
}

func TestNoAnswererFailsClosed(t *testing.T) {
	var s approval.Service
	ans, err := s.Ask(stdctx.Background(), req("bash", "rm"))
	if !errs.HasCode(err, approval.NoAnswerer) {
		t.Fatalf("want APPROVAL_NO_ANSWERER, got %v", err)
	}
	if ans.Allowed() || ans.Choice != approval.Deny {
		t.Fatalf("a failed ask must also answer deny: %+v", ans)
	}
}

func TestAllowSessionIsRememberedPerPattern(t *testing.T) {
	var s approval.Service
	var asked atomic.Int32
	detach, _ := s.Attach("a", func(_ stdctx.Context, r approval.Request) (approval.Answer, error) {
		asked.Add(1)
		return approval.Answer{Choice: approval.AllowSession}, nil
	})
	defer detach()
	ask := func(tool, pattern string) {
		t.Helper()
		if ans, err := s.Ask(stdctx.Background(), req(tool, pattern)); err != nil || !ans.Allowed() {
			t.Fatalf("%s %s: %+v %v", tool, pattern, ans, err)
		}
	}
	ask("bash", "git")
	ask("bash", "git")
	if asked.Load() != 1 {
		t.Fatalf("the second git call must not be asked: asked %d times", asked.Load())
	}
	ask("bash", "rm")
	if asked.Load() != 2 {
		t.Fatalf("another pattern must be asked: asked %d times", asked.Load())
	}
	ask("write", "")
	ask("write", "/any/path")
	if asked.Load() != 3 {
		t.Fatalf("an answer for the whole tool covers every pattern: asked %d times", asked.Load())
	}
	other := approval.Request{AgentID: "b", Tool: "write"}
	if _, err := s.Ask(stdctx.Background(), other); !errs.HasCode(err, approval.NoAnswerer) {
		t.Fatalf("a's answer must not cover agent b: %v", err)
	}
	s.Forget("a")
	ask("bash", "git")
	if asked.Load() != 4 {
		t.Fatalf("after Forget the call must be asked again: asked %d times", asked.Load())
	}
}

func TestAllowOnceAndDenyAreNotRemembered(t *testing.T) {
	var s approval.Service
	var asked atomic.Int32
	choices := []approval.Choice{approval.AllowOnce, approval.Deny, approval.AllowOnce}
	detach, _ := s.Attach("a", func(stdctx.Context, approval.Request) (approval.Answer, error) {
		c := choices[asked.Add(1)-1]
		return approval.Answer{Choice: c, Reason: "not now"}, nil
	})
	defer detach()
	for i, want := range choices {
		ans, err := s.Ask(stdctx.Background(), req("bash", "git"))
		if err != nil || ans.Choice != want {
			t.Fatalf("ask %d: %+v %v", i, ans, err)
		}
		if want == approval.Deny && ans.Reason != "not now" {
			t.Fatalf("the denial's reason is lost: %+v", ans)
		}
	}
	if asked.Load() != 3 {
		t.Fatalf("asked %d times, want 3", asked.Load())
	}
}

func TestFailingAnswererDenies(t *testing.T) {
	for name, a := range map[string]approval.Answerer{
		"error": func(stdctx.Context, approval.Request) (approval.Answer, error) {
			return approval.Answer{Choice: approval.AllowOnce}, errors.New("terminal closed")
		},
		"panic": func(stdctx.Context, approval.Request) (approval.Answer, error) { panic("broken prompt") },
		"nonsense": func(stdctx.Context, approval.Request) (approval.Answer, error) {
			return approval.Answer{Choice: "yes please"}, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			var s approval.Service
			detach, _ := s.Attach("a", a)
			defer detach()
			ans, err := s.Ask(stdctx.Background(), req("bash", ""))
			if !errs.HasCode(err, approval.AnswererFailed) || ans.Allowed() {
				t.Fatalf("want a denial coded APPROVAL_ANSWERER_FAILED, got %+v %v", ans, err)
			}
			if ans.Reason == "" {
				t.Fatal("the denial needs a reason")
			}
		})
	}
}

// TestCancelWhilePendingReturnsAtOnce: an answerer that ignores ctx still
// cannot hold the call; the next ask waits until that answerer returns, so
// the answerer never gets two questions at once.
func TestCancelWhilePendingReturnsAtOnce(t *testing.T) {
	var s approval.Service
	asked := make(chan approval.Request, 2)
	unblock := make(chan struct{})
	detach, _ := s.Attach("a", func(_ stdctx.Context, r approval.Request) (approval.Answer, error) {
		asked <- r
		<-unblock // deaf to ctx on purpose
		return approval.Answer{Choice: approval.AllowSession}, nil
	})
	defer detach()
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Ask(ctx, req("bash", "rm"))
		errc <- err
	}()
	<-asked
	cancel()
	if err := <-errc; !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("want the cancellation, got %v", err)
	}
	close(unblock)
	// The late AllowSession of a cancelled ask is not remembered.
	ans, err := s.Ask(stdctx.Background(), req("bash", "rm"))
	if err != nil || !ans.Allowed() {
		t.Fatalf("second ask: %+v %v", ans, err)
	}
	select {
	case <-asked:
	default:
		t.Fatal("the second ask must reach the answerer: a cancelled ask's answer is void")
	}
}

func TestCancelWhileWaitingForTheTurn(t *testing.T) {
	var s approval.Service
	asked := make(chan struct{}, 2)
	release := make(chan struct{})
	detach, _ := s.Attach("a", func(ctx stdctx.Context, _ approval.Request) (approval.Answer, error) {
		asked <- struct{}{}
		<-release
		return approval.Answer{Choice: approval.AllowOnce}, nil
	})
	defer detach()
	first := make(chan error, 1)
	go func() {
		_, err := s.Ask(stdctx.Background(), req("bash", ""))
		first <- err
	}()
	<-asked
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	second := make(chan error, 1)
	go func() {
		_, err := s.Ask(ctx, req("bash", ""))
		second <- err
	}()
	approval.WaitAsks(&s, "a", 2)
	cancel()
	if err := <-second; !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("a queued ask must end with its ctx: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if len(asked) != 0 {
		t.Fatal("the cancelled ask must never reach the answerer")
	}
}

func TestAsksOfOneAgentAreSerialized(t *testing.T) {
	var s approval.Service
	var inFlight, most atomic.Int32
	asked := make(chan string, 4)
	release := make(chan struct{})
	detach, _ := s.Attach("a", func(_ stdctx.Context, r approval.Request) (approval.Answer, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		asked <- r.CallID
		<-release
		return approval.Answer{Choice: approval.AllowOnce}, nil
	})
	defer detach()
	var wg sync.WaitGroup
	for _, id := range []string{"c1", "c2", "c3"} {
		wg.Go(func() {
			if _, err := s.Ask(stdctx.Background(), approval.Request{AgentID: "a", CallID: id, Tool: "bash"}); err != nil {
				t.Error(err)
			}
		})
	}
	approval.WaitAsks(&s, "a", 3)
	seen := map[string]bool{}
	for range 3 {
		seen[<-asked] = true
		if len(asked) != 0 {
			t.Fatal("a second question reached the answerer before the first was answered")
		}
		release <- struct{}{}
	}
	wg.Wait()
	if len(seen) != 3 || most.Load() != 1 {
		t.Fatalf("asked %v, at most %d at once", seen, most.Load())
	}
}

func TestDetachWhileAskingFailsClosed(t *testing.T) {
	var s approval.Service
	asked := make(chan struct{})
	detach, _ := s.Attach("a", func(ctx stdctx.Context, _ approval.Request) (approval.Answer, error) {
		close(asked)
		<-ctx.Done()
		return approval.Answer{}, ctx.Err()
	})
	errc := make(chan error, 1)
	go func() {
		_, err := s.Ask(stdctx.Background(), req("bash", ""))
		errc <- err
	}()
	<-asked
	detach()
	if err := <-errc; !errs.HasCode(err, approval.NoAnswerer) {
		t.Fatalf("want APPROVAL_NO_ANSWERER after detach, got %v", err)
	}
}

// fakeAgent is just enough of an agent for the registry: an id and a scope.
type fakeAgent struct {
	agents.Agent
	id    string
	scope *dshctx.Context
}

func (f *fakeAgent) ID() string               { return f.id }
func (f *fakeAgent) Context() *dshctx.Context { return f.scope }

func TestPluginEmitsInTheAgentsScopeAndForgetsOnDispose(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	for _, p := range []dshctx.Plugin{agents.Plugin, approval.Plugin} {
		f, err := root.Plugin(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	reg, _ := agents.Key.Get(root)
	s, err := approval.Key.Get(root)
	if err != nil {
		t.Fatal(err)
	}
	scope, _ := root.Scoped("a")
	other, _ := root.Scoped("b")
	agent := &fakeAgent{id: "a", scope: scope}
	reg.Reserve("a")
	reg.Publish(agent)

	var mine, theirs []string
	approval.EventRequested.On(scope, func(_ stdctx.Context, r approval.Request) error {
		mine = append(mine, "requested "+r.Tool)
		return nil
	})
	approval.EventAnswered.On(scope, func(_ stdctx.Context, a approval.Answered) error {
		what := "answered " + string(a.Answer.Choice)
		if a.Remembered {
			what += " (remembered)"
		}
		mine = append(mine, what)
		return nil
	})
	approval.EventAnswered.On(other, func(stdctx.Context, approval.Answered) error {
		theirs = append(theirs, "b heard a")
		return nil
	})
	var asked int
	detach, _ := s.Attach("a", func(stdctx.Context, approval.Request) (approval.Answer, error) {
		asked++
		return approval.Answer{Choice: approval.AllowSession}, nil
	})
	defer detach()
	s.Ask(stdctx.Background(), req("bash", ""))
	s.Ask(stdctx.Background(), req("bash", ""))
	want := []string{"requested bash", "answered allow-session", "answered allow-session (remembered)"}
	if !slices.Equal(mine, want) || len(theirs) != 0 {
		t.Fatalf("a heard %q (want %q), b heard %q", mine, want, theirs)
	}
	agents.EventDisposed.Emit(stdctx.Background(), scope, agent)
	s.Ask(stdctx.Background(), req("bash", ""))
	if asked != 2 {
		t.Fatalf("a disposed agent's session answers must be forgotten: asked %d times", asked)
	}
}

// With an attach grace, an Ask that finds nobody attached waits for the
// first answerer (a session taken over by this host, its server not yet
// attached), and that answerer's answer is the Ask's.
func TestAttachGraceWaitsForTheFirstAnswerer(t *testing.T) {
	var s approval.Service
	s.SetAttachGrace(time.Minute)
	type result struct {
		ans approval.Answer
		err error
	}
	out := make(chan result, 1)
	go func() {
		ans, err := s.Ask(stdctx.Background(), req("bash", ""))
		out <- result{ans, err}
	}()
	select {
	case r := <-out:
		t.Fatalf("the ask did not wait: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	detach, err := s.Attach("a", always(approval.AllowOnce))
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	if r := <-out; r.err != nil || r.ans.Choice != approval.AllowOnce {
		t.Fatalf("answered by the answerer that attached: %+v", r)
	}
}

// Past the grace the Ask fails closed saying so; a cancelled caller stops
// waiting at once.
func TestAttachGraceRunsOut(t *testing.T) {
	var s approval.Service
	grace := 100 * time.Millisecond
	s.SetAttachGrace(grace)
	start := time.Now()
	ans, err := s.Ask(stdctx.Background(), req("bash", ""))
	if !errs.HasCode(err, approval.NoAnswerer) || ans.Allowed() || !strings.Contains(err.Error(), "attach grace") {
		t.Fatalf("past the grace: %+v %v", ans, err)
	}
	if waited := time.Since(start); waited < grace {
		t.Fatalf("failed after %s, within the grace of %s", waited, grace)
	}
	s.SetAttachGrace(time.Hour)
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 50*time.Millisecond)
	defer cancel()
	if ans, err := s.Ask(ctx, req("bash", "")); !errors.Is(err, stdctx.DeadlineExceeded) || ans.Allowed() {
		t.Fatalf("a cancelled ask during the grace: %+v %v", ans, err)
	}
}
