package serve

import (
	stdctx "context"
	"slices"
	"sync"

	"github.com/dsh-go/dsh/errs"
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
	id       string
	approver *approver
}

// approver is the server's one approving client of a session: the hub's
// answerer while the session is open here, so a question waits for any
// client — a stream's page, a REST call — and outlives a page reload. It
// keeps the questions pending for GET .../approvals. Its stream
// re-attaches itself when it falls behind.
type approver struct {
	id     string
	stream sessions.Stream
	cancel stdctx.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	pending map[int64]live.Question
}

// startApprover attaches to session id as an approving client, from the
// session's end (it needs questions, not history), and follows its
// questions.
func startApprover(svc sessions.Service, id string) (*approver, error) {
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	st, err := svc.Attach(ctx, id, sessions.AttachOptions{FromEnd: true, Approvals: true, Name: approverName})
	if err != nil {
		cancel()
		return nil, err
	}
	a := &approver{id: id, stream: st, cancel: cancel, done: make(chan struct{}), pending: map[int64]live.Question{}}
	go a.follow(ctx)
	return a, nil
}

// follow reads the approver's stream and keeps the questions.
func (a *approver) follow(ctx stdctx.Context) {
	defer close(a.done)
	for {
		u, err := a.stream.Next(ctx)
		if err != nil {
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

// ended says the approver's stream ended: its session closed.
func (a *approver) ended() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
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
// one fails with LIVE_QUESTION_CLOSED, one to a closing session with
// SESSION_CLOSED.
func (a *approver) Answer(id int64, ans approval.Answer) error {
	err := a.stream.Answer(id, ans)
	if err == nil || errs.HasCode(err, live.QuestionClosed) {
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
	}
	return err
}

// stop detaches the approver; a question it alone held is withdrawn and
// its call fails closed.
func (a *approver) stop() {
	a.cancel()
	<-a.done
	_ = a.stream.Close()
}
