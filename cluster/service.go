package cluster

import (
	stdctx "context"
	"fmt"
	"sync"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/google/uuid"
)

// Service is the session service of a cluster host: sessions.Service over
// the local controller, each call served where its session runs. A
// session open here is served by the controller; one open on another host
// goes there over NATS (the owner's admission, approvals and outcomes
// decide, and its errors come back with their codes); one open nowhere is
// claimed here (Ensure, Prompt) or answered from the shared store
// (History, List, Delete, Attachment). So an entry point given a Service —
// webhooks, schedules, the API — routes across hosts without knowing it.
//
// Attach to a session open on another host streams its durable events
// from the log (Follower) and answers its approvals through a relay on
// the owner (relay.go), which follows the session to its next owner; the
// stream ends with LIVE_HUB_CLOSED when the session closes there
// (stream.go). Stream chunks, snapshots, notices and tool starts are the
// owner's only.
type Service struct {
	local    *sessions.Controller
	follower *Follower

	mu   sync.Mutex
	host *Host
}

var _ sessions.Service = (*Service)(nil)

// NewService returns the cluster's Service over local, streaming the
// sessions of other hosts with f. It routes once Bind gives it the host's
// membership; until then every call that needs routing fails with NoHost
// (retryable), so an entry point started before the host joined never
// opens here a session another host runs.
func NewService(local *sessions.Controller, f *Follower) *Service {
	return &Service{local: local, follower: f}
}

// Bind starts routing through h, the host's membership.
func (s *Service) Bind(h *Host) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.host = h
}

func (s *Service) joined() (*Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.host == nil {
		return nil, errs.New(NoHost, "cluster: this host has not joined the cluster yet, so it cannot tell where a session runs; retry in a moment")
	}
	return s.host, nil
}

// Ensure opens, resumes or joins the session where it runs: joined on its
// owner, or opened here (claimed) when nobody runs it. A session without
// an id is created here.
func (s *Service) Ensure(ctx stdctx.Context, o sessions.EnsureOptions) (sessions.Info, error) {
	if o.SessionID == "" || o.Agent == "" {
		return s.local.Ensure(ctx, o)
	}
	h, err := s.joined()
	if err != nil {
		return sessions.Info{}, err
	}
	var in sessions.Info
	err = h.call(ctx, opEnsure, o.SessionID, o, &in)
	return in, err
}

// Prompt queues a message for a turn where the session runs.
func (s *Service) Prompt(ctx stdctx.Context, id string, r sessions.PromptRequest) (sessions.Turn, error) {
	return s.send(ctx, id, sessions.ModeFollowup, r)
}

// Steer hands a message to the running turn where the session runs.
func (s *Service) Steer(ctx stdctx.Context, id string, r sessions.PromptRequest) (sessions.Turn, error) {
	return s.send(ctx, id, sessions.ModeSteer, r)
}

func (s *Service) send(ctx stdctx.Context, id string, mode sessions.Mode, r sessions.PromptRequest) (sessions.Turn, error) {
	h, err := s.joined()
	if err != nil {
		return sessions.Turn{}, err
	}
	if r.RequestID == "" {
		// Wait finds a turn by its request id, wherever it runs.
		r.RequestID = "sessions-" + uuid.NewString()
	}
	msg, err := h.Prompt(ctx, id, mode, r)
	if err != nil {
		return sessions.Turn{}, err
	}
	return sessions.NewTurn(s, id, r.RequestID, msg), nil
}

// Wait waits, where the session runs, for the outcome of requestID; a
// session that moves meanwhile is followed to its next owner.
func (s *Service) Wait(ctx stdctx.Context, id, requestID string) (sessions.TurnResult, error) {
	h, err := s.joined()
	if err != nil {
		return sessions.TurnResult{}, err
	}
	for {
		var r waitResult
		if err := h.call(ctx, opWait, id, idArgs{RequestID: requestID}, &r); err != nil {
			return sessions.TurnResult{}, err
		}
		if !r.Pending {
			return r.TurnResult, nil
		}
	}
}

// Idle waits until the session has nothing left to do where it runs.
func (s *Service) Idle(ctx stdctx.Context, id string) error {
	h, err := s.joined()
	if err != nil {
		return err
	}
	for {
		var r waitResult
		if err := h.call(ctx, opIdle, id, nil, &r); err != nil || !r.Pending {
			return err
		}
	}
}

// Attach streams the session: from the controller when it is open here,
// else its durable events from the log, with approvals relayed from its
// owner (see Service).
func (s *Service) Attach(ctx stdctx.Context, id string, o sessions.AttachOptions) (sessions.Stream, error) {
	h, err := s.joined()
	if err != nil {
		return nil, err
	}
	owner, err := h.runs(ctx, id)
	if err != nil {
		return nil, err
	}
	if owner == "" || owner == h.o.HostID {
		return s.local.Attach(ctx, id, o)
	}
	if s.follower == nil {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf(
			"cluster: session %q runs on host %q and this Service has no Follower to stream it; pass one to NewService", id, owner))
	}
	return s.attachRemote(ctx, h, id, owner, o)
}

// Cancel cancels the session's turn where it runs.
func (s *Service) Cancel(ctx stdctx.Context, id string) error {
	h, err := s.joined()
	if err != nil {
		return err
	}
	return h.Cancel(ctx, id)
}

// Info describes the session as its owner sees it.
func (s *Service) Info(ctx stdctx.Context, id string) (sessions.Info, error) {
	var in sessions.Info
	err := s.forward(ctx, opInfo, id, nil, &in)
	return in, err
}

// History reads the session's log: from memory when it is open here,
// else from the shared store, which holds what its owner has flushed.
func (s *Service) History(ctx stdctx.Context, id string, afterSeq int64) ([]session.Event, error) {
	return s.local.History(ctx, id, afterSeq)
}

// Outcome asks the session's owner for the outcome of requestID.
func (s *Service) Outcome(ctx stdctx.Context, id, requestID string) (sessions.RequestOutcome, bool, error) {
	var r outcomeResult
	err := s.forward(ctx, opOutcome, id, idArgs{RequestID: requestID}, &r)
	return r.Outcome, r.OK, err
}

// Attachment reads a part of the session's log from its owner, or from
// the store when it is open nowhere.
func (s *Service) Attachment(ctx stdctx.Context, id, ref string) (llm.Part, []byte, error) {
	var r attachmentResult
	if err := s.forward(ctx, opAttachment, id, idArgs{Ref: ref}, &r); err != nil {
		return llm.Part{}, nil, err
	}
	return r.Part, r.Data, nil
}

// Commands asks the session's owner for its prompt commands.
func (s *Service) Commands(ctx stdctx.Context, id string) ([]sessions.PromptCommand, error) {
	var cmds []sessions.PromptCommand
	err := s.forward(ctx, opCommands, id, nil, &cmds)
	return cmds, err
}

// Rewind rewinds the session on the host that runs it: the workspace it
// restores is that host's.
func (s *Service) Rewind(ctx stdctx.Context, id string, r sessions.RewindRequest) (sessions.RewindResult, error) {
	var res sessions.RewindResult
	err := s.forward(ctx, opRewind, id, r, &res)
	return res, err
}

// Plan asks the session's owner to run a plan operation.
func (s *Service) Plan(ctx stdctx.Context, id string, r sessions.PlanRequest) (session.PlanState, error) {
	var st session.PlanState
	err := s.forward(ctx, opPlan, id, r, &st)
	return st, err
}

// Goal runs the goal operation on the session's owner, which drives the
// goal; a set or resume may open the session on the host holding its
// lease, as a prompt does.
func (s *Service) Goal(ctx stdctx.Context, id string, r sessions.GoalRequest) (sessions.Goal, error) {
	var g sessions.Goal
	err := s.forward(ctx, opGoal, id, r, &g)
	return g, err
}

// List lists the shared store: its index marks the sessions open on any
// host.
func (s *Service) List(ctx stdctx.Context) ([]session.Summary, error) {
	return s.local.List(ctx)
}

// ListPage lists one page of the shared store, as List does: every host
// reads the same index, so the page and its cursor are the same whichever
// host is asked, and a walk of the cursors may move between hosts.
func (s *Service) ListPage(ctx stdctx.Context, opts session.ListOptions) (session.Page, error) {
	return s.local.ListPage(ctx, opts)
}

// Find reads the session's summary from the shared store's index.
func (s *Service) Find(ctx stdctx.Context, id string) (session.Summary, bool, error) {
	return s.local.Find(ctx, id)
}

// Close closes the session where it runs.
func (s *Service) Close(ctx stdctx.Context, id string) error {
	h, err := s.joined()
	if err != nil {
		return err
	}
	return h.CloseSession(ctx, id)
}

// Delete deletes the session: on its owner when it is open somewhere
// (which refuses an open session as the controller does), else from the
// shared store.
func (s *Service) Delete(ctx stdctx.Context, id string) error {
	return s.forward(ctx, opDelete, id, nil, nil)
}

func (s *Service) forward(ctx stdctx.Context, op, id string, args, out any) error {
	h, err := s.joined()
	if err != nil {
		return err
	}
	return h.call(ctx, op, id, args, out)
}

// runs returns the host the session runs on: this one when it is open
// here, the lease's holder otherwise, "" when nobody runs it.
func (h *Host) runs(ctx stdctx.Context, id string) (string, error) {
	if ss, ok := h.o.Sessions.Get(id); ok && !h.stale(ctx, ss) {
		return h.o.HostID, nil
	}
	if !session.ValidID(id) {
		return "", nil // the controller refuses it
	}
	lease, owned, err := h.owner(ctx, id)
	if err != nil || !owned {
		return "", err
	}
	return lease.HostID, nil
}
