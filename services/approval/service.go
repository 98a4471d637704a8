package approval

import (
	stdctx "context"
	"fmt"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
)

// Service holds the answerer of each agent, serializes the agent's asks
// and remembers its "allow for this session" answers. The zero value works
// but emits no notifications; Plugin provides one that does.
type Service struct {
	home   *dshctx.Context
	agents *agents.Registry

	mu        sync.Mutex
	answerers map[string]*attachment
	grants    map[string]map[grant]struct{}
	turns     map[string]*turn
	// attachGrace is how long Ask waits for an answerer to attach (see
	// SetAttachGrace); arrivals wakes the asks waiting for agent's.
	attachGrace time.Duration
	arrivals    map[string]chan struct{}
}

// SetAttachGrace makes an Ask that finds nobody attached wait up to d for
// an answerer before it fails closed. dsh serve sets it: a session another
// host took over resumes its turn before the server attaches as its
// approver. 0, the default, fails closed at once, right for a run that
// has nobody to wait for. It never delays an answerer already attached.
func (s *Service) SetAttachGrace(d time.Duration) {
	s.mu.Lock()
	s.attachGrace = max(d, 0)
	s.mu.Unlock()
}

// attachment is one Attach; gone ends when it is detached, which cancels
// the question it may be answering.
type attachment struct {
	answer Answerer
	gone   stdctx.Context
	detach stdctx.CancelFunc
}

// grant is what one AllowSession answer covers; an empty pattern covers
// every call of the tool.
type grant struct{ tool, pattern string }

// turn lets one ask of an agent at a time reach its answerer; users counts
// the asks holding or waiting for it, so the entry goes when none do.
type turn struct {
	ch    chan struct{}
	users int
}

// Attach makes a the answerer of agentID until detach is called. An agent
// has at most one answerer: a second Attach fails with
// APPROVAL_ANSWERER_ATTACHED. detach may be called any number of times; it
// cancels the question a is answering, which then fails closed.
func (s *Service) Attach(agentID string, a Answerer) (detach func(), err error) {
	if agentID == "" || a == nil {
		return nil, errs.New(errs.InvalidArgument, "approval.Attach: pass an agent id and a non-nil answerer")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answerers[agentID] != nil {
		return nil, errs.New(AnswererAttached, fmt.Sprintf(
			"agent %q already has an approval answerer attached; one answers per agent: detach it before attaching another", agentID))
	}
	if s.answerers == nil {
		s.answerers = map[string]*attachment{}
	}
	gone, cancel := stdctx.WithCancel(stdctx.Background())
	at := &attachment{answer: a, gone: gone, detach: cancel}
	s.answerers[agentID] = at
	if ch := s.arrivals[agentID]; ch != nil {
		close(ch)
		delete(s.arrivals, agentID)
	}
	return func() {
		s.mu.Lock()
		if s.answerers[agentID] == at {
			delete(s.answerers, agentID)
		}
		s.mu.Unlock()
		at.detach()
	}, nil
}

// Forget drops what agentID's person allowed for the session. The Plugin's
// service calls it when the agent is disposed.
func (s *Service) Forget(agentID string) {
	s.mu.Lock()
	delete(s.grants, agentID)
	s.mu.Unlock()
}

// Ask asks agentID's answerer whether req may run and returns its answer.
// An earlier AllowSession that covers req answers at once. Asks of one
// agent wait for each other. With nobody attached, or an answerer that
// fails, Ask fails closed: a Deny answer and an error coded
// APPROVAL_NO_ANSWERER or APPROVAL_ANSWERER_FAILED. When ctx ends Ask
// returns ctx's error (and a Deny) at once, even if the answerer is slow
// to notice.
func (s *Service) Ask(ctx stdctx.Context, req Request) (Answer, error) {
	if req.AgentID == "" {
		return refused(errs.New(errs.InvalidArgument, "approval.Ask: the request names no agent"))
	}
	if err := ctx.Err(); err != nil {
		return s.cancelled(req, err)
	}
	if s.granted(req) {
		return s.remembered(req), nil
	}
	t := s.enter(req.AgentID)
	select {
	case t.ch <- struct{}{}:
	case <-ctx.Done():
		s.leave(req.AgentID, t)
		return s.cancelled(req, ctx.Err())
	}
	release := func() {
		<-t.ch
		s.leave(req.AgentID, t)
	}
	// The ask this one waited for may have allowed it for the session.
	if s.granted(req) {
		release()
		return s.remembered(req), nil
	}
	a, waited, err := s.answerer(ctx, req.AgentID)
	if err != nil {
		release()
		return s.cancelled(req, err)
	}
	if a == nil {
		release()
		err := errs.New(NoAnswerer, fmt.Sprintf(
			"nobody is attached to agent %q to approve a call of %q, so it is refused (fail closed)", req.AgentID, req.Tool))
		if waited > 0 {
			err = errs.New(NoAnswerer, fmt.Sprintf(
				"nobody attached to agent %q within %s (the attach grace) to approve a call of %q, so it is refused (fail closed)", req.AgentID, waited, req.Tool))
		}
		s.emitAnswered(Answered{Request: req, Answer: deny(err), Err: err})
		return refused(err)
	}
	s.emitRequested(req)
	done := make(chan outcome, 1)
	// The answerer runs apart so that a cancelled call returns at once;
	// the turn stays held until the answerer returns, so it is never asked
	// two questions at once even when it is slow to see ctx end.
	go func() {
		defer release()
		o := s.answer(ctx, a, req)
		s.emitAnswered(Answered{Request: req, Answer: o.answer, Err: o.err})
		done <- o
	}()
	select {
	case o := <-done:
		return o.answer, o.err
	case <-ctx.Done():
		return refused(ctx.Err())
	}
}

// answerer returns agentID's answerer, waiting up to the attach grace for
// one when none is attached; waited is the grace it waited in vain. It
// fails only when ctx ends.
func (s *Service) answerer(ctx stdctx.Context, agentID string) (a *attachment, waited time.Duration, err error) {
	s.mu.Lock()
	a, grace := s.answerers[agentID], s.attachGrace
	if a != nil || grace == 0 {
		s.mu.Unlock()
		return a, 0, nil
	}
	if s.arrivals == nil {
		s.arrivals = map[string]chan struct{}{}
	}
	arrived := s.arrivals[agentID]
	if arrived == nil {
		arrived = make(chan struct{})
		s.arrivals[agentID] = arrived
	}
	s.mu.Unlock()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-arrived:
	case <-t.C:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	s.mu.Lock()
	a = s.answerers[agentID]
	if a == nil && s.arrivals[agentID] == arrived {
		delete(s.arrivals, agentID)
	}
	s.mu.Unlock()
	return a, grace, nil
}

type outcome struct {
	answer Answer
	err    error
}

// answer runs the answerer and turns whatever it does into an outcome.
func (s *Service) answer(ctx stdctx.Context, a *attachment, req Request) outcome {
	actx, cancel := stdctx.WithCancel(ctx)
	defer cancel()
	stop := stdctx.AfterFunc(a.gone, cancel)
	defer stop()
	ans, err := call(actx, a.answer, req)
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case err != nil && a.gone.Err() != nil:
		err = errs.Wrap(NoAnswerer, err, fmt.Sprintf(
			"the answerer of agent %q was detached while asked about a call of %q, so it is refused (fail closed)", req.AgentID, req.Tool))
	case err != nil:
		err = errs.Wrap(AnswererFailed, err, fmt.Sprintf("the approval answerer of agent %q failed", req.AgentID))
	case ans.Choice != AllowOnce && ans.Choice != AllowSession && ans.Choice != Deny:
		err = errs.New(AnswererFailed, fmt.Sprintf(
			"the approval answerer of agent %q answered %q; want %q, %q or %q", req.AgentID, ans.Choice, AllowOnce, AllowSession, Deny))
	}
	if err != nil {
		return outcome{deny(err), err}
	}
	if ans.Choice == AllowSession {
		s.remember(req)
	}
	return outcome{answer: ans}
}

// call runs an answerer; its panic is an error, never the host's crash.
func call(ctx stdctx.Context, a Answerer, req Request) (ans Answer, err error) {
	defer func() {
		if p := recover(); p != nil {
			ans, err = Answer{}, fmt.Errorf("the answerer panicked: %v", p)
		}
	}()
	return a(ctx, req)
}

func deny(err error) Answer { return Answer{Choice: Deny, Reason: err.Error()} }

func refused(err error) (Answer, error) { return deny(err), err }

func (s *Service) cancelled(req Request, err error) (Answer, error) {
	s.emitAnswered(Answered{Request: req, Answer: deny(err), Err: err})
	return refused(err)
}

func (s *Service) remembered(req Request) Answer {
	ans := Answer{Choice: AllowSession}
	s.emitAnswered(Answered{Request: req, Answer: ans, Remembered: true})
	return ans
}

func (s *Service) granted(req Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.grants[req.AgentID]
	if g == nil {
		return false
	}
	_, one := g[grant{req.Tool, req.Pattern}]
	_, all := g[grant{req.Tool, ""}]
	return one || all
}

func (s *Service) remember(req Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grants == nil {
		s.grants = map[string]map[grant]struct{}{}
	}
	g := s.grants[req.AgentID]
	if g == nil {
		g = map[grant]struct{}{}
		s.grants[req.AgentID] = g
	}
	g[grant{req.Tool, req.Pattern}] = struct{}{}
}

func (s *Service) enter(agentID string) *turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turns == nil {
		s.turns = map[string]*turn{}
	}
	t := s.turns[agentID]
	if t == nil {
		t = &turn{ch: make(chan struct{}, 1)}
		s.turns[agentID] = t
	}
	t.users++
	return t
}

func (s *Service) leave(agentID string, t *turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.users--; t.users == 0 && s.turns[agentID] == t {
		delete(s.turns, agentID)
	}
}
