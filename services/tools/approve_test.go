package tools_test

import (
	stdctx "context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/tools"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stage is a root with the approval service, a tools service and an agent
// scope "a" with a counting tool "bash" (which asks by default) and "read".
type stage struct {
	root, at *dshctx.Context
	tools    *tools.Service
	approval *approval.Service
	ran      atomic.Int32
}

func newStage(t testing.TB) *stage {
	root := newRoot(t)
	for _, p := range []dshctx.Plugin{agents.Plugin, approval.Plugin} {
		f, err := root.Plugin(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	st := &stage{root: root, tools: tools.New()}
	st.approval, _ = approval.Key.Get(root)
	st.at, _ = root.Scoped("a")
	run := func(stdctx.Context, tools.Call) (tools.Result, error) {
		st.ran.Add(1)
		return tools.Result{Content: "ran"}, nil
	}
	schema := []byte(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)
	st.tools.Register(root, tools.Tool{Name: "bash", Parameters: schema, Approval: tools.Ask, Execute: run})
	st.tools.Register(root, tools.Tool{Name: "read", Parameters: []byte(`{"type":"object"}`), ParallelSafe: true, Execute: run})
	return st
}

func (st *stage) exec(t testing.TB, ctx stdctx.Context, name, command string) (tools.Result, error) {
	t.Helper()
	return st.tools.Execute(ctx, st.at, tools.Call{AgentID: "a", ID: "c1", Name: name, Arguments: []byte(`{"command":"` + command + `"}`)})
}

func (st *stage) answer(t testing.TB, a approval.Answerer) {
	t.Helper()
	detach, err := st.approval.Attach("a", a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(detach)
}

func mustContain(t testing.TB, r tools.Result, parts ...string) {
	t.Helper()
	if !r.IsError {
		t.Fatalf("want an error result, got %+v", r)
	}
	for _, p := range parts {
		if !strings.Contains(r.Content, p) {
			t.Errorf("result does not say %q:\n%s", p, r.Content)
		}
	}
}

func TestAnUnattendedDenialDoesNotBlameAUser(t *testing.T) {
	st := newStage(t)
	st.answer(t, func(stdctx.Context, approval.Request) (approval.Answer, error) {
		return approval.Answer{Choice: approval.Deny, Reason: "dsh run -p has nobody to ask", Unattended: true}, nil
	})
	r, _ := st.exec(t, stdctx.Background(), "bash", "git push")
	mustContain(t, r, "nobody to ask", "refused automatically")
	if strings.Contains(r.Content, "by the user") || strings.Contains(r.Content, "ask the user") {
		t.Fatalf("a denial nobody made is blamed on a user: %s", r.Content)
	}
}

func TestPolicyDenyIsAResultWithTheReason(t *testing.T) {
	st := newStage(t)
	tools.EventApprove.On(st.at, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		if a.Call.Name == "read" {
			return tools.Verdict{Decision: tools.Deny, Reason: "reading secrets is off limits", Source: "tools.permission"}, nil
		}
		return next.Call(ctx, a)
	})
	r, err := st.exec(t, stdctx.Background(), "read", "x")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, r, `"read"`, "denied", `"tools.permission"`, "reading secrets is off limits", "did not run")
	if st.ran.Load() != 0 {
		t.Fatal("a denied call ran")
	}
}

func TestInvalidArgumentsNeverReachThePolicy(t *testing.T) {
	st := newStage(t)
	var asked atomic.Int32
	tools.EventApprove.On(st.root, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		asked.Add(1)
		return next.Call(ctx, a)
	})
	r, _ := st.tools.Execute(stdctx.Background(), st.at, tools.Call{Name: "bash", Arguments: []byte(`{}`)})
	mustContain(t, r, `"command" is required`)
	if asked.Load() != 0 {
		t.Fatal("the policy saw a call whose arguments were invalid")
	}
}

func TestUnknownToolIsAResult(t *testing.T) {
	st := newStage(t)
	r, err := st.tools.Execute(stdctx.Background(), st.at, tools.Call{Name: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, r, `unknown tool "nope"`)
}

func TestAskWithNobodyAttachedFailsClosed(t *testing.T) {
	st := newStage(t)
	r, err := st.exec(t, stdctx.Background(), "bash", "rm -rf ~")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, r, "not approved", "nobody is attached", `"a"`, "--allow bash", "tools.permission", "interactively")
	if st.ran.Load() != 0 {
		t.Fatal("an unapproved call ran")
	}
	// With no approval service loaded at all, the same.
	bare := newRoot(t)
	s := tools.New()
	s.Register(bare, tools.Tool{Name: "bash", Approval: tools.Ask, Execute: echo("ran")})
	r, err = s.Execute(stdctx.Background(), bare, tools.Call{Name: "bash"})
	if err != nil || r.Content == "ran" {
		t.Fatalf("without an approval service an ask must fail closed: %+v %v", r, err)
	}
	mustContain(t, r, "not approved", "--allow bash")
}

func TestAskAnsweredByThePerson(t *testing.T) {
	st := newStage(t)
	var got []approval.Request
	choices := []approval.Answer{
		{Choice: approval.AllowOnce},
		{Choice: approval.Deny, Reason: "not on main"},
		{Choice: approval.AllowSession},
	}
	st.answer(t, func(_ stdctx.Context, r approval.Request) (approval.Answer, error) {
		got = append(got, r)
		return choices[len(got)-1], nil
	})
	tools.EventApprove.On(st.at, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		v, err := next.Call(ctx, a)
		v.Reason, v.Pattern = "bash asks", "git"
		return v, err
	})
	if r, _ := st.exec(t, stdctx.Background(), "bash", "git status"); r.IsError || st.ran.Load() != 1 {
		t.Fatalf("allow once must run the call: %+v", r)
	}
	r, _ := st.exec(t, stdctx.Background(), "bash", "git push")
	mustContain(t, r, "denied by the user", "not on main")
	if st.ran.Load() != 1 {
		t.Fatal("a call the person denied ran")
	}
	st.exec(t, stdctx.Background(), "bash", "git log")
	st.exec(t, stdctx.Background(), "bash", "git diff")
	if len(got) != 3 || st.ran.Load() != 3 {
		t.Fatalf("allow for this session must answer the next git call: asked %d, ran %d", len(got), st.ran.Load())
	}
	first := got[0]
	if first.AgentID != "a" || first.CallID != "c1" || first.Tool != "bash" || first.Summary != "git status" ||
		first.Reason != "bash asks" || first.Pattern != "git" || !strings.Contains(string(first.Arguments), "git status") {
		t.Fatalf("the request does not carry the call: %+v", first)
	}
}

func TestFailingAnswererIsAResult(t *testing.T) {
	st := newStage(t)
	st.answer(t, func(stdctx.Context, approval.Request) (approval.Answer, error) { panic("tty gone") })
	r, err := st.exec(t, stdctx.Background(), "bash", "ls")
	if err != nil {
		t.Fatalf("an answerer's panic must not fail the turn: %v", err)
	}
	mustContain(t, r, "not approved", "tty gone")
	if st.ran.Load() != 0 {
		t.Fatal("the call ran")
	}
}

func TestCancelWhileApprovalIsPending(t *testing.T) {
	st := newStage(t)
	pending := make(chan struct{})
	unblock := make(chan struct{})
	st.answer(t, func(stdctx.Context, approval.Request) (approval.Answer, error) {
		close(pending)
		<-unblock // a person who never answers, and ignores ctx
		return approval.Answer{Choice: approval.AllowOnce}, nil
	})
	defer close(unblock)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := st.exec(t, ctx, "bash", "make")
		errc <- err
	}()
	<-pending
	cancel()
	if err := <-errc; !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("a cancelled call must end with ctx's error so the turn ends aborted: %v", err)
	}
	if st.ran.Load() != 0 {
		t.Fatal("a cancelled call ran")
	}
}

func TestConcurrentCallsAskOneAtATime(t *testing.T) {
	st := newStage(t)
	var inFlight, most atomic.Int32
	st.answer(t, func(stdctx.Context, approval.Request) (approval.Answer, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return approval.Answer{Choice: approval.AllowOnce}, nil
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if r, err := st.exec(t, stdctx.Background(), "bash", "ls"); err != nil || r.IsError {
				t.Errorf("%+v %v", r, err)
			}
			if r, err := st.exec(t, stdctx.Background(), "read", "x"); err != nil || r.IsError {
				t.Errorf("%+v %v", r, err)
			}
		})
	}
	wg.Wait()
	if most.Load() != 1 || st.ran.Load() != 16 {
		t.Fatalf("at most %d questions at once, %d calls ran", most.Load(), st.ran.Load())
	}
}

func TestBrokenPolicies(t *testing.T) {
	st := newStage(t)
	off, _ := tools.EventApprove.On(st.at, func(stdctx.Context, tools.Approval, tools.ApproveNext) (tools.Verdict, error) {
		return tools.Verdict{}, errors.New("rules file unreadable")
	})
	r, err := st.exec(t, stdctx.Background(), "read", "x")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, r, "not approved", "rules file unreadable")
	off()
	off, _ = tools.EventApprove.On(st.at, func(stdctx.Context, tools.Approval, tools.ApproveNext) (tools.Verdict, error) {
		return tools.Verdict{Decision: "maybe", Source: "odd"}, nil
	})
	r, _ = st.exec(t, stdctx.Background(), "read", "x")
	mustContain(t, r, "not approved", `"maybe"`, `"odd"`)
	off()
	tools.EventApprove.On(st.at, func(stdctx.Context, tools.Approval, tools.ApproveNext) (tools.Verdict, error) {
		panic("policy bug")
	})
	if _, err := st.exec(t, stdctx.Background(), "read", "x"); !errs.HasCode(err, errs.ListenerFailed) {
		t.Fatalf("a policy's panic fails the turn like a tool's: %v", err)
	}
	if st.ran.Load() != 0 {
		t.Fatal("a call ran past a broken policy")
	}
}

// A policy that rewrites a call's arguments runs the tool with the rewrite,
// and a rewrite that breaks the schema refuses the call, saying who did it.
func TestPolicyRewritesArguments(t *testing.T) {
	st := newStage(t)
	var seen []byte
	st.tools.Register(st.root, tools.Tool{Name: "echo",
		Parameters: []byte(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`),
		Execute: func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
			seen = c.Arguments
			return tools.Result{Content: "ran"}, nil
		}})
	rewrite := `{"command":"ls -la"}`
	if _, err := tools.EventApprove.On(st.root, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		return tools.Verdict{Decision: tools.Allow, Source: "rewriter", Arguments: []byte(rewrite)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	r, err := st.exec(t, stdctx.Background(), "echo", "ls")
	if err != nil || r.IsError || string(seen) != `{"command":"ls -la"}` {
		t.Fatalf("rewrite: %+v %v, tool saw %s", r, err, seen)
	}
	rewrite = `{"command":7}`
	seen = nil
	r, err = st.exec(t, stdctx.Background(), "echo", "ls")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, r, `"rewriter"`, "rewrote", "command")
	if seen != nil {
		t.Fatalf("a call with an invalid rewrite ran with %s", seen)
	}
}

// A policy that passes a call on as someone else's changes nothing of whom
// it acts for in the policies after it; its rewrite of the arguments goes on.
func TestAPolicyCannotForgeWhomACallActsFor(t *testing.T) {
	st := newStage(t)
	tools.EventApprove.On(st.root, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		a.Call.Sources = []llm.Provenance{{Principal: llm.Principal{Kind: "token", ID: "root"}, Entry: "cli"}}
		a.Call.Unattended, a.Call.AgentID = false, "other"
		a.Call.Arguments = []byte(`{"command":"ls"}`)
		return next.Call(ctx, a)
	})
	var seen tools.Call
	tools.EventApprove.On(st.root, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		seen = a.Call
		return tools.Verdict{Decision: tools.Allow}, nil
	})
	ci := []llm.Provenance{{Principal: llm.Principal{Kind: "webhook", ID: "ci"}, Entry: "webhook"}}
	r, err := st.tools.Execute(stdctx.Background(), st.at, tools.Call{AgentID: "a", ID: "c1", Name: "read", Arguments: []byte(`{}`), Unattended: true, Sources: ci})
	if err != nil || r.IsError {
		t.Fatalf("%+v %v", r, err)
	}
	if len(seen.Sources) != 1 || seen.Sources[0].Principal.ID != "ci" || !seen.Unattended || seen.AgentID != "a" {
		t.Errorf("the policy after the forger saw %+v", seen)
	}
	if string(seen.Arguments) != `{"command":"ls"}` {
		t.Errorf("the rewrite was lost: %s", seen.Arguments)
	}
}
