package live_test

import (
	stdctx "context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/sessions/live"
)

type asked struct {
	ans approval.Answer
	err error
}

// ask runs an Ask in the background, as the tools' approval stage does.
func ask(ctx stdctx.Context, svc *approval.Service, tool string) <-chan asked {
	out := make(chan asked, 1)
	go func() {
		ans, err := svc.Ask(ctx, approval.Request{AgentID: "agent-1", Tool: tool, Summary: "rm -rf build"})
		out <- asked{ans, err}
	}()
	return out
}

func attach(t testing.TB, h *live.Hub, name string, approvals bool) *live.Client {
	t.Helper()
	c, err := h.Attach(stdctx.Background(), live.AttachOptions{Name: name, Approvals: approvals})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func question(t testing.TB, c *live.Client) *live.Question {
	t.Helper()
	u := next(t, c)
	if u.Kind != live.KindQuestion {
		t.Fatalf("%s: want a question, got %+v", c.Name(), u)
	}
	return u.Question
}

func settled(t testing.TB, c *live.Client) *live.Settled {
	t.Helper()
	u := next(t, c)
	if u.Kind != live.KindSettled {
		t.Fatalf("%s: want settled, got %+v", c.Name(), u)
	}
	return u.Settled
}

func TestFirstAnswerWinsOthersAreTold(t *testing.T) {
	svc := &approval.Service{}
	h := newHub(t, newAgent(t), live.Options{Approvals: svc})
	tab1, tab2 := attach(t, h, "tab1", true), attach(t, h, "tab2", true)
	watcher := attach(t, h, "watcher", false)
	res := ask(stdctx.Background(), svc, "bash")
	q1, q2 := question(t, tab1), question(t, tab2)
	if q1.ID != q2.ID || q1.Request.Tool != "bash" {
		t.Fatalf("questions differ: %+v %+v", q1, q2)
	}
	if err := tab2.Answer(q2.ID, approval.Answer{Choice: approval.AllowOnce}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.ans.Choice != approval.AllowOnce {
		t.Fatalf("Ask: %+v", r)
	}
	if s := settled(t, tab1); s.AnsweredBy != "tab2" || s.Answer.Choice != approval.AllowOnce || s.QuestionID != q1.ID {
		t.Fatalf("tab1 told %+v", s)
	}
	err := tab1.Answer(q1.ID, approval.Answer{Choice: approval.Deny})
	if !errs.HasCode(err, live.QuestionClosed) || !strings.Contains(err.Error(), `answered by "tab2"`) {
		t.Fatalf("late answer: %v", err)
	}
	if err := watcher.Answer(q1.ID, approval.Answer{Choice: approval.Deny}); !errs.HasCode(err, live.NotApprover) {
		t.Fatalf("a client that does not approve: %v", err)
	}
	if err := tab1.Answer(q1.ID, approval.Answer{Choice: "maybe"}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("bad choice: %v", err)
	}
	// The watcher saw neither the question nor its outcome.
	h.Notice(live.Notice{Type: "probe"})
	if u := next(t, watcher); u.Kind != live.KindNotice {
		t.Fatalf("watcher got %+v", u)
	}
}

func TestDetachMidQuestionLeavesItWithTheOthers(t *testing.T) {
	svc := &approval.Service{}
	h := newHub(t, newAgent(t), live.Options{Approvals: svc})
	tab1, tab2 := attach(t, h, "tab1", true), attach(t, h, "tab2", true)
	res := ask(stdctx.Background(), svc, "bash")
	question(t, tab1)
	tab1.Detach()
	q := question(t, tab2)
	// A client attaching while the question is open is asked too.
	tab3 := attach(t, h, "tab3", true)
	if q3 := question(t, tab3); q3.ID != q.ID {
		t.Fatalf("tab3 asked %d, want %d", q3.ID, q.ID)
	}
	if err := tab3.Answer(q.ID, approval.Answer{Choice: approval.Deny, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.ans.Choice != approval.Deny || r.ans.Reason != "no" {
		t.Fatalf("Ask: %+v", r)
	}
	if s := settled(t, tab2); s.AnsweredBy != "tab3" {
		t.Fatalf("tab2 told %+v", s)
	}
}

func TestLastApproverLeavingFailsTheQuestionClosed(t *testing.T) {
	svc := &approval.Service{}
	h := newHub(t, newAgent(t), live.Options{Approvals: svc})
	tab := attach(t, h, "tab", true)
	res := ask(stdctx.Background(), svc, "bash")
	question(t, tab)
	tab.Detach()
	if r := <-res; !errs.HasCode(r.err, approval.NoAnswerer) || r.ans.Allowed() {
		t.Fatalf("Ask after the last approver left: %+v", r)
	}
}

func TestNoApproverFailsClosedAtOnce(t *testing.T) {
	svc := &approval.Service{}
	h := newHub(t, newAgent(t), live.Options{Approvals: svc})
	attach(t, h, "watcher", false)
	if r := <-ask(stdctx.Background(), svc, "bash"); !errs.HasCode(r.err, approval.NoAnswerer) || r.ans.Allowed() {
		t.Fatalf("no approver: %+v", r)
	}
	// Approvers come and go: the Hub attaches to the service with the
	// first and detaches with the last.
	tab := attach(t, h, "tab", true)
	res := ask(stdctx.Background(), svc, "bash")
	q := question(t, tab)
	tab.Answer(q.ID, approval.Answer{Choice: approval.AllowOnce})
	if r := <-res; r.err != nil {
		t.Fatal(r.err)
	}
	tab.Detach()
	if r := <-ask(stdctx.Background(), svc, "bash"); !errs.HasCode(r.err, approval.NoAnswerer) {
		t.Fatalf("after the last approver left: %+v", r)
	}
}

func TestCancelWithdrawsTheQuestion(t *testing.T) {
	svc := &approval.Service{}
	h := newHub(t, newAgent(t), live.Options{Approvals: svc})
	tab1, tab2 := attach(t, h, "tab1", true), attach(t, h, "tab2", true)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	res := ask(ctx, svc, "bash")
	q := question(t, tab1)
	question(t, tab2)
	cancel()
	if r := <-res; r.err == nil || r.ans.Allowed() {
		t.Fatalf("cancelled Ask: %+v", r)
	}
	for _, c := range []*live.Client{tab1, tab2} {
		if s := settled(t, c); !s.Withdrawn || s.QuestionID != q.ID {
			t.Fatalf("%s told %+v", c.Name(), s)
		}
	}
	if err := tab1.Answer(q.ID, approval.Answer{Choice: approval.AllowOnce}); !errs.HasCode(err, live.QuestionClosed) || !strings.Contains(err.Error(), "withdrawn") {
		t.Fatalf("answer to a withdrawn question: %v", err)
	}
}

func TestAnotherAnswererKeepsApproversOut(t *testing.T) {
	svc := &approval.Service{}
	detach, err := svc.Attach("agent-1", func(stdctx.Context, approval.Request) (approval.Answer, error) {
		return approval.Answer{Choice: approval.Deny}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	h := newHub(t, newAgent(t), live.Options{Approvals: svc})
	if _, err := h.Attach(stdctx.Background(), live.AttachOptions{Approvals: true}); !errs.HasCode(err, approval.AnswererAttached) {
		t.Fatalf("approver while another answerer is attached: %v", err)
	}
	attach(t, h, "watcher", false)
}

func TestCloseDetachesTheAnswerer(t *testing.T) {
	svc := &approval.Service{}
	h := newHub(t, newAgent(t), live.Options{Approvals: svc})
	tab := attach(t, h, "tab", true)
	h.Close()
	if _, err := tab.Next(stdctx.Background()); !errs.HasCode(err, live.HubClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := h.Attach(stdctx.Background(), live.AttachOptions{}); !errs.HasCode(err, live.HubClosed) {
		t.Fatalf("attach after Close: %v", err)
	}
	if r := <-ask(stdctx.Background(), svc, "bash"); !errs.HasCode(r.err, approval.NoAnswerer) {
		t.Fatalf("after Close: %+v", r)
	}
}

// TestGraceKeepsTheQuestionForAReturningApprover: with ApproverGrace, the
// last approver leaving (a page reloading, a stream dropped as too slow)
// does not fail the question: the next approving client gets it and its
// answer is the Ask's.
func TestGraceKeepsTheQuestionForAReturningApprover(t *testing.T) {
	svc := &approval.Service{}
	h := newHub(t, newAgent(t), live.Options{Approvals: svc, ApproverGrace: time.Minute})
	tab := attach(t, h, "tab", true)
	res := ask(stdctx.Background(), svc, "bash")
	question(t, tab)
	tab.Detach()
	select {
	case r := <-res:
		t.Fatalf("the question failed within the grace: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	back := attach(t, h, "tab-again", true)
	q := question(t, back)
	if err := back.Answer(q.ID, approval.Answer{Choice: approval.AllowOnce}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.ans.Choice != approval.AllowOnce {
		t.Fatalf("Ask answered by the returning approver: %+v", r)
	}
}

// TestGraceRunsOutFailsClosed: nobody comes back within the grace: the
// question fails closed saying so, and a later question with nobody
// attached fails at once.
func TestGraceRunsOutFailsClosed(t *testing.T) {
	svc := &approval.Service{}
	grace := 100 * time.Millisecond
	h := newHub(t, newAgent(t), live.Options{Approvals: svc, ApproverGrace: grace})
	tab := attach(t, h, "tab", true)
	tab.Detach()
	start := time.Now()
	r := <-ask(stdctx.Background(), svc, "bash")
	if !errs.HasCode(r.err, approval.NoAnswerer) || r.ans.Allowed() || !strings.Contains(r.err.Error(), "approver grace") {
		t.Fatalf("Ask past the grace: %+v", r)
	}
	if waited := time.Since(start); waited < grace/2 {
		t.Fatalf("failed after %s, before the grace of %s", waited, grace)
	}
	start = time.Now()
	if r := <-ask(stdctx.Background(), svc, "bash"); !errs.HasCode(r.err, approval.NoAnswerer) {
		t.Fatalf("after the grace: %+v", r)
	}
	if waited := time.Since(start); waited > grace/2 {
		t.Fatalf("a question after the grace waited %s", waited)
	}
}

// TestCloseEndsTheGrace: closing the Hub detaches it at once; nothing
// waits for a grace.
func TestCloseEndsTheGrace(t *testing.T) {
	svc := &approval.Service{}
	h := newHub(t, newAgent(t), live.Options{Approvals: svc, ApproverGrace: time.Hour})
	tab := attach(t, h, "tab", true)
	tab.Detach()
	res := ask(stdctx.Background(), svc, "bash")
	time.Sleep(10 * time.Millisecond)
	h.Close()
	select {
	case r := <-res:
		if !errs.HasCode(r.err, approval.NoAnswerer) || r.ans.Allowed() {
			t.Fatalf("Ask after Close: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a closed Hub kept the question for its grace")
	}
}
