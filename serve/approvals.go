package serve

import (
	stdctx "context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// approverName is how the server's approving client is named to the
// others: a question answered over REST is "answered by http".
const approverName = "http"

// held is a session this server opened: it keeps it, and answers its
// approvals, until it is closed.
type held struct {
	s        *sessions.Session
	approver *approver
}

// approver is the server's one approving client of a session's hub: the
// hub's answerer while the session is open here, so a question waits for
// any client — a stream's page, a REST call — and outlives a page reload.
// It keeps the questions pending for GET .../approvals.
type approver struct {
	s      *sessions.Session
	cancel stdctx.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	tab     *sessions.Attachment
	client  *live.Client
	pending map[int64]live.Question
}

// startApprover attaches to s's hub as an approving client and follows
// its questions.
func startApprover(s *sessions.Session) (*approver, error) {
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	a := &approver{s: s, cancel: cancel, done: make(chan struct{}), pending: map[int64]live.Question{}}
	// From the session's end: the approver needs questions, not history.
	tab, err := s.Attach(ctx, sessions.AttachOptions{AfterSeq: int64(s.UnportedAgent().Session().Len()), Approvals: true, Name: approverName})
	if errs.HasCode(err, live.BadSeq) {
		tab, err = s.Attach(ctx, sessions.AttachOptions{Approvals: true, Name: approverName})
	}
	if err != nil {
		cancel()
		return nil, err
	}
	client := host.Live(tab)
	if client == nil {
		cancel()
		return nil, errors.Join(errs.New(errs.Internal, "serve: the session controller has no live hub; serve needs the host's"), tab.Detach(stdctx.Background()))
	}
	a.tab, a.client = tab, client
	go a.follow(ctx)
	return a, nil
}

// follow reads the approver's stream: it must keep up, or the hub would
// drop it, so it only keeps the questions.
func (a *approver) follow(ctx stdctx.Context) {
	defer close(a.done)
	for {
		a.mu.Lock()
		client := a.client
		a.mu.Unlock()
		u, err := client.Next(ctx)
		switch {
		case errs.HasCode(err, live.Overflow):
			next, aerr := a.s.Attach(ctx, sessions.AttachOptions{AfterSeq: client.LastSeq(), Approvals: true, Name: approverName})
			if aerr != nil {
				return
			}
			a.mu.Lock()
			old := a.tab
			a.tab, a.client = next, host.Live(next)
			a.mu.Unlock()
			_ = old.Detach(stdctx.Background())
			continue
		case err != nil:
			return
		}
		a.mu.Lock()
		switch u.Kind {
		case live.KindQuestion:
			a.pending[u.Question.ID] = *u.Question
		case live.KindSettled:
			delete(a.pending, u.Settled.QuestionID)
		}
		a.mu.Unlock()
	}
}

// Pending returns the open questions, oldest first.
func (a *approver) Pending() []live.Question {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]live.Question, 0, len(a.pending))
	for _, q := range a.pending {
		out = append(out, q)
	}
	slices.SortFunc(out, func(x, y live.Question) int { return int(x.ID - y.ID) })
	return out
}

// Answer answers question id; the first answer of any client wins, a late
// one fails with LIVE_QUESTION_CLOSED.
func (a *approver) Answer(id int64, ans approval.Answer) error {
	a.mu.Lock()
	client := a.client
	a.mu.Unlock()
	err := client.Answer(id, ans)
	if err == nil || errs.HasCode(err, live.QuestionClosed) {
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
	}
	if errs.HasCode(err, live.Detached) || errs.HasCode(err, live.HubClosed) {
		return errs.Wrap(sessions.Closed, err, fmt.Sprintf("session %q is closing; question %d can no longer be answered", a.s.ID(), id))
	}
	return err
}

// stop detaches the approver; a question it alone held is withdrawn and
// its call fails closed.
func (a *approver) stop() {
	a.cancel()
	<-a.done
	a.mu.Lock()
	tab := a.tab
	a.mu.Unlock()
	_ = tab.Detach(stdctx.Background())
}
