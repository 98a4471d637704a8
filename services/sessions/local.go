package sessions

import (
	stdctx "context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/google/uuid"
)

// The Controller is the local Service: the methods below name a session
// by id and serve it from the sessions open here.

// open returns session id open here, or NotFound.
func (c *Controller) session(id string) (*Session, error) {
	s, ok := c.Get(id)
	if !ok {
		return nil, notFound(id)
	}
	return s, nil
}

// Prompt queues a message for a turn of session id; see Service.Prompt.
func (c *Controller) Prompt(ctx stdctx.Context, id string, r PromptRequest) (Turn, error) {
	return c.send(ctx, id, r, (*Session).Prompt)
}

// Steer hands a message to the running turn of session id.
func (c *Controller) Steer(ctx stdctx.Context, id string, r PromptRequest) (Turn, error) {
	return c.send(ctx, id, r, (*Session).Steer)
}

func (c *Controller) send(ctx stdctx.Context, id string, r PromptRequest, deliver func(*Session, stdctx.Context, PromptRequest) (string, error)) (Turn, error) {
	s, err := c.session(id)
	if err != nil {
		return Turn{}, err
	}
	if r.RequestID == "" {
		// Wait finds a turn by its request id.
		r.RequestID = "sessions-" + uuid.NewString()
	}
	msgID, err := deliver(s, ctx, r)
	if err != nil {
		return Turn{}, err
	}
	return NewTurn(c, id, r.RequestID, msgID), nil
}

// Wait waits for the recorded outcome of requestID in session id; see
// Service.Wait. A session closed meanwhile is still read to the end.
func (c *Controller) Wait(ctx stdctx.Context, id, requestID string) (TurnResult, error) {
	s, err := c.session(id)
	if err != nil {
		return TurnResult{}, err
	}
	return s.Wait(ctx, requestID)
}

// Attach starts a Stream of session id; see Service.Attach.
func (c *Controller) Attach(ctx stdctx.Context, id string, o AttachOptions) (Stream, error) {
	s, err := c.session(id)
	if err != nil {
		return nil, err
	}
	return s.Stream(ctx, o)
}

// Cancel cancels the turn of session id; see Session.Cancel.
func (c *Controller) Cancel(ctx stdctx.Context, id string) error {
	s, err := c.session(id)
	if err != nil {
		return err
	}
	return s.Cancel(ctx)
}

// Idle waits until session id has nothing left to do, or ctx ends.
func (c *Controller) Idle(ctx stdctx.Context, id string) error {
	s, err := c.session(id)
	if err != nil {
		return err
	}
	return s.handle.Agent.WhenIdle(ctx)
}

// Info describes session id.
func (c *Controller) Info(_ stdctx.Context, id string) (Info, error) {
	s, err := c.session(id)
	if err != nil {
		return Info{}, err
	}
	return s.Info(), nil
}

// Outcome returns the recorded outcome of requestID in session id: from
// the session while it is open here, else from its stored log, when the
// Catalog can load logs. A retry is answered from the record after the
// session closed too (a webhook's redelivery that its memory would
// otherwise answer as accepted).
func (c *Controller) Outcome(ctx stdctx.Context, id, requestID string) (RequestOutcome, bool, error) {
	if s, ok := c.Get(id); ok {
		o, ok := s.RequestOutcome(requestID)
		return o, ok, nil
	}
	l, ok := c.catalog.(LogLoader)
	if !ok {
		return RequestOutcome{}, false, notFound(id)
	}
	evs, err := l.Load(ctx, id)
	if err != nil {
		return RequestOutcome{}, false, err
	}
	o, ok := outcomeInEvents(evs, requestID)
	return o, ok, nil
}

// LogLoader is what a Catalog implements to serve History for sessions
// that are stored but not open (the host's reads the session store).
type LogLoader interface {
	Load(ctx stdctx.Context, sessionID string) ([]session.Event, error)
}

// History returns the events of session id after afterSeq: from memory
// when it is open here, else from the Catalog when it can load logs.
func (c *Controller) History(ctx stdctx.Context, id string, afterSeq int64) ([]session.Event, error) {
	if s, ok := c.Get(id); ok {
		return s.Log().Events(afterSeq + 1), nil
	}
	l, ok := c.catalog.(LogLoader)
	if !ok {
		if c.catalog == nil {
			return nil, noCatalog(fmt.Sprintf("read the history of session %q", id))
		}
		return nil, errs.New(session.Unsupported, fmt.Sprintf("session %q is not open here and this controller's catalog cannot load logs; resume the session to read it", id))
	}
	evs, err := l.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	for i, e := range evs {
		if e.Seq > afterSeq {
			return evs[i:], nil
		}
	}
	return nil, nil
}

// Info describes the open session.
func (s *Session) Info() Info { return s.info("") }

func (s *Session) info(how How) Info {
	a := s.handle.Agent
	in := Info{ID: s.id, Agent: s.agent, AgentID: s.agentID, How: how,
		Running: a.Status() == agents.StatusRunning, Pending: a.Pending()}
	if o := s.Outcomes(); len(o) > 0 {
		in.Outcomes = o
	}
	in.Tools = toolNames(a)
	log := a.Session()
	if log == nil {
		return in
	}
	in.Tenant = log.Tenant()
	in.LastSeq = int64(log.Len())
	in.Messages = log.History().Len()
	if it, ok := log.Interrupted(); ok {
		in.Interrupted = &it
	}
	n := int64(log.Len())
	if n == 0 {
		return in
	}
	if last := log.Events(n); len(last) == 1 {
		in.Updated, in.Turns = last[0].Time, last[0].Turn
	}
	in.Created, in.Title = s.head(log)
	return in
}

// toolNames are the tools agent a offers its model, sorted.
func toolNames(a agents.Agent) []string {
	svc, err := tools.Key.Get(a.Context())
	if err != nil {
		return nil
	}
	var names []string
	for _, spec := range svc.Specs(a.Context()) {
		names = append(names, spec.Name)
	}
	slices.Sort(names)
	return names
}

// Stream attaches a client to the session's live hub as a Stream that
// re-attaches itself after an overflow.
func (s *Session) Stream(ctx stdctx.Context, o AttachOptions) (Stream, error) {
	tab, err := s.Attach(ctx, o)
	if err != nil {
		return nil, err
	}
	c, ok := tab.client.(streamClient)
	if !ok {
		return nil, errors.Join(errs.New(errs.Internal, fmt.Sprintf(
			"session %q has no live hub to stream from; give the controller one (Options.NewHub, e.g. LiveHubs)", s.id)), tab.Detach(stdctx.Background()))
	}
	return &localStream{s: s, o: o, tab: tab, c: c}, nil
}

// head returns the time of the log's first event and the title its first
// prompt gives, read from the log once: neither changes after.
func (s *Session) head(log *session.Session) (time.Time, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.titled {
		return s.created, s.title
	}
	evs := log.Events(1)
	if len(evs) > 0 {
		s.created = evs[0].Time
	}
	for _, e := range evs {
		if e.Type == session.UserMessage && e.Message != nil {
			s.title, s.titled = session.Title(e.Message.Content), true
			break
		}
	}
	return s.created, s.title
}
