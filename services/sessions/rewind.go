package sessions

import (
	stdctx "context"
	"fmt"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
)

// Codes of Rewind.
const (
	// RewindBusy: the session runs a turn or has prompts queued; a
	// rewind waits for it to be idle (cancel the turn first).
	RewindBusy errs.Code = "REWIND_BUSY"
	// NoCheckpoints: a code rewind was asked of a session whose agent
	// records no checkpoints (the session.checkpoints plugin is not
	// mounted for it).
	NoCheckpoints errs.Code = "REWIND_NO_CHECKPOINTS"
	// WorkspaceChanged: a code rewind found the workspace changed since
	// the checkpoint; Details["differs"] lists the paths. Force
	// overrides it.
	WorkspaceChanged errs.Code = "REWIND_WORKSPACE_CHANGED"
)

// RewindRequest asks Rewind to take a session back to before a turn or
// step, or (Redo) to undo its last rewind.
type RewindRequest struct {
	// To is the turn (and step) to go back to before.
	To session.Point `json:"to,omitzero"`
	// Code rewinds the workspace, Conversation the conversation; neither
	// set means both.
	Code         bool `json:"code,omitempty"`
	Conversation bool `json:"conversation,omitempty"`
	// Force rewinds the workspace even where it changed since the
	// checkpoint (what changed is overwritten; the rewind records it).
	Force bool `json:"force,omitempty"`
	// Redo undoes the last rewind instead; To is ignored.
	Redo bool `json:"redo,omitempty"`
}

// normalized reads "neither code nor conversation" as both.
func (r RewindRequest) normalized() RewindRequest {
	if !r.Code && !r.Conversation {
		r.Code, r.Conversation = true, true
	}
	return r
}

// RewindResult is the rewind or redo event the session recorded.
type RewindResult struct {
	Event session.Event `json:"event"`
}

// RewindCall is the payload of session/rewind.
type RewindCall struct {
	Agent   agents.Agent
	Request RewindRequest
	// By is who asked (WithActor), recorded in the event.
	By string
}

// EventRewind runs a rewind in the agent's scope. The session.checkpoints
// plugin answers it for agents it records checkpoints for, rewinding the
// workspace and the conversation; the default rewinds the conversation
// alone and refuses a code rewind with NoCheckpoints.
var EventRewind = waterfall.New("session/rewind", conversationRewind)

// conversationRewind rewinds (or redoes) the conversation alone.
func conversationRewind(ctx stdctx.Context, c RewindCall) (RewindResult, error) {
	r := c.Request
	log := c.Agent.Session()
	if r.Redo {
		ev, err := log.Redoable()
		if err != nil {
			return RewindResult{}, err
		}
		if ev.Rewind.Code {
			return RewindResult{}, errs.New(NoCheckpoints, fmt.Sprintf(
				"the last rewind (seq %d) rewound the workspace, and agent %q records no checkpoints to redo it with; add `- use: session.checkpoints` to the agent's plugins",
				ev.Seq, c.Agent.ID()))
		}
		return RewindResult{Event: log.AppendRedo(ctx, session.Rewind{Redo: ev.Seq, Conversation: true, By: c.By})}, nil
	}
	if r.Code {
		return RewindResult{}, errs.New(NoCheckpoints, fmt.Sprintf(
			"agent %q records no checkpoints, so its workspace cannot be rewound; rewind the conversation alone (--conversation), or add `- use: session.checkpoints` to the agent's plugins for the next turns",
			c.Agent.ID()))
	}
	ev, err := log.AppendRewind(ctx, session.Rewind{To: r.To, Conversation: true, By: c.By})
	return RewindResult{Event: ev}, err
}

// idleGrace is how long Rewind waits for a session whose turn is ending.
const idleGrace = time.Second

// Rewind takes session id back to before r.To — its workspace, its
// conversation or both — or redoes its last rewind; see Service.Rewind.
func (c *Controller) Rewind(ctx stdctx.Context, id string, r RewindRequest) (RewindResult, error) {
	s, err := c.session(id)
	if err != nil {
		return RewindResult{}, err
	}
	if !r.Redo {
		r = r.normalized()
	}
	agent := s.handle.Agent
	busy := errs.New(RewindBusy, fmt.Sprintf(
		"session %q is running a turn or has prompts queued; wait for it to end or cancel it (/cancel), then rewind", id))
	// No prompt is admitted while the rewind runs (those sent meanwhile
	// wait for it), and it does not start while one is being admitted.
	for deadline := time.Now().Add(idleGrace); !s.deliveries.TryLock(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return RewindResult{}, busy
		}
	}
	defer s.deliveries.Unlock()
	in := s.Info()
	if in.Pending > 0 {
		return RewindResult{}, busy
	}
	if in.Running {
		// The agent's status lags the end of a turn a moment: a client
		// that waited for its turn and rewinds at once is not refused.
		wctx, cancel := stdctx.WithTimeout(ctx, idleGrace)
		err := agent.WhenIdle(wctx)
		cancel()
		if err != nil {
			return RewindResult{}, busy
		}
	}
	res, err := EventRewind.Dispatch(ctx, agent.Context(), RewindCall{Agent: agent, Request: r, By: ActorOf(ctx)})
	if err != nil {
		return RewindResult{}, err
	}
	// The rewind is stored before the caller hears it happened.
	if err := agent.Session().Flush(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// Listener signatures of session/rewind, so a plugin can name them.
type (
	RewindListener = waterfall.Listener[RewindCall, RewindResult]
	RewindNext     = waterfall.Next[RewindCall, RewindResult]
)
