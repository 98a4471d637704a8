package cluster

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
)

// The ops a host forwards to a session's owner beside prompt, cancel and
// close: each is a sessions.Service method the owner runs on its own
// controller, its arguments and result carried as JSON (request.Args,
// answer.Result) and its error encoded with errs.Encode, so code, reason
// and presented survive the hop.
const (
	opEnsure     = "ensure"
	opWait       = "wait"
	opIdle       = "idle"
	opInfo       = "info"
	opOutcome    = "outcome"
	opCommands   = "commands"
	opPlan       = "plan"
	opAttachment = "attachment"
	opGoal       = "goal"
	opDelete     = "delete"
	opRewind     = "rewind"
	// The approval relay (relay.go).
	opApprove = "approve"
	opAnswer  = "answer"
	opDetach  = "detach"
)

// waitSlice bounds how long an owner serves one forwarded wait or idle:
// past it the owner answers "still pending" and the sender asks again. A
// sender that gave up thus leaves no wait running on the owner for
// longer, and a session that moved meanwhile is found at its new owner.
var waitSlice = 10 * time.Second

// claimsFor reports whether op may open the session on a host that
// holds its lease without having it open: only what delivers to it.
func claimsFor(op string) bool {
	switch op {
	case opPrompt, opEnsure, opCancel, opClose, opGoal:
		return true
	}
	return false
}

type (
	idArgs struct {
		RequestID string `json:"request_id,omitempty"`
		Ref       string `json:"ref,omitempty"`
	}
	waitResult struct {
		sessions.TurnResult
		// Pending: not decided within waitSlice; ask again.
		Pending bool `json:"pending,omitempty"`
	}
	outcomeResult struct {
		Outcome sessions.RequestOutcome `json:"outcome"`
		OK      bool                    `json:"ok"`
	}
	// attachmentResult carries the bytes beside the part: llm.Part keeps
	// Data out of JSON.
	attachmentResult struct {
		Part llm.Part `json:"part"`
		Data []byte   `json:"data"`
	}
	approveArgs struct {
		sessions.AttachOptions
		// Inbox is where the owner sends the questions (relay.go).
		Inbox string `json:"inbox"`
	}
	answerArgs struct {
		Relay    string          `json:"relay"`
		Question int64           `json:"question,omitempty"`
		Answer   approval.Answer `json:"answer,omitzero"`
	}
)

// claimOptions are how a claim for req opens the session: the caller's
// EnsureOptions for an ensure, else Options.Open's resume.
func (h *Host) claimOptions(req request) (sessions.EnsureOptions, error) {
	if req.Op == opEnsure {
		var o sessions.EnsureOptions
		err := decodeArgs(req, &o)
		return o, err
	}
	if h.o.Open == nil {
		return sessions.EnsureOptions{}, errs.New(NoHost, fmt.Sprintf(
			"cluster: session %q has a lease naming host %q but is not open in it, and the host has no session opener to resume it", req.Session, h.o.HostID))
	}
	return sessions.EnsureOptions{OpenOptions: h.o.Open(req.Session), Mode: sessions.EnsureExisting}, nil
}

// op runs a forwarded op on this host's controller; claimed is what the
// claim made for this request did (ensure reports it).
func (h *Host) op(ctx stdctx.Context, req request, claimed sessions.How) (answer, error) {
	c, id := h.o.Sessions, req.Session
	var args idArgs
	switch req.Op {
	case opWait, opOutcome, opAttachment:
		if err := decodeArgs(req, &args); err != nil {
			return answer{}, err
		}
	}
	switch req.Op {
	case opEnsure:
		if claimed != "" {
			in, err := c.Info(ctx, id)
			in.How = claimed
			return result(in, err)
		}
		var o sessions.EnsureOptions
		if err := decodeArgs(req, &o); err != nil {
			return answer{}, err
		}
		return result(c.Ensure(ctx, o))
	case opWait:
		wctx, cancel := stdctx.WithTimeoutCause(ctx, waitSlice, errSlice)
		defer cancel()
		r, err := c.Wait(wctx, id, args.RequestID)
		if sliced(ctx, wctx, err) {
			return result(waitResult{Pending: true}, nil)
		}
		return result(waitResult{TurnResult: r}, err)
	case opIdle:
		wctx, cancel := stdctx.WithTimeoutCause(ctx, waitSlice, errSlice)
		defer cancel()
		err := c.Idle(wctx, id)
		if sliced(ctx, wctx, err) {
			return result(waitResult{Pending: true}, nil)
		}
		return result(waitResult{}, err)
	case opInfo:
		return result(c.Info(ctx, id))
	case opOutcome:
		o, ok, err := c.Outcome(ctx, id, args.RequestID)
		return result(outcomeResult{Outcome: o, OK: ok}, err)
	case opCommands:
		return result(c.Commands(ctx, id))
	case opPlan:
		var r sessions.PlanRequest
		if err := decodeArgs(req, &r); err != nil {
			return answer{}, err
		}
		return result(c.Plan(ctx, id, r))
	case opAttachment:
		p, data, err := c.Attachment(ctx, id, args.Ref)
		return result(attachmentResult{Part: p, Data: data}, err)
	case opGoal:
		var r sessions.GoalRequest
		if err := decodeArgs(req, &r); err != nil {
			return answer{}, err
		}
		return result(c.Goal(ctx, id, r))
	case opDelete:
		return answer{}, c.Delete(ctx, id)
	case opRewind:
		var r sessions.RewindRequest
		if err := decodeArgs(req, &r); err != nil {
			return answer{}, err
		}
		return result(c.Rewind(ctx, id, r))
	case opApprove, opAnswer, opDetach:
		return h.relayOp(ctx, req)
	}
	return answer{}, errs.New(errs.InvalidArgument, fmt.Sprintf(
		"cluster: host %q got op %q for session %q, which it does not know; do all hosts run the same dsh version?", h.o.HostID, req.Op, id))
}

// errSlice ends a forwarded wait at waitSlice.
var errSlice = errors.New("cluster: the wait's slice ended")

// sliced reports whether err ended a wait under wctx because its slice
// ran out, not because the host is leaving.
func sliced(ctx, wctx stdctx.Context, err error) bool {
	return err != nil && ctx.Err() == nil && errors.Is(stdctx.Cause(wctx), errSlice)
}

func result(v any, err error) (answer, error) {
	if err != nil {
		return answer{}, err
	}
	b, merr := json.Marshal(v)
	if merr != nil {
		return answer{}, errs.Wrap(errs.Internal, merr, "cluster: cannot encode the result of a forwarded op")
	}
	return answer{Result: b}, nil
}

func decodeArgs(req request, v any) error {
	if len(req.Args) == 0 {
		return nil
	}
	if err := json.Unmarshal(req.Args, v); err != nil {
		return errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("cluster: the arguments of a forwarded %s for session %q cannot be read; do all hosts run the same dsh version?", req.Op, req.Session))
	}
	return nil
}

// call routes op with args for session id and decodes its result into out
// (when not nil).
func (h *Host) call(ctx stdctx.Context, op, id string, args, out any) error {
	req := request{Op: op, Session: id, Actor: sessions.ActorOf(ctx)}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return errs.Wrap(errs.Internal, err, fmt.Sprintf("cluster: cannot encode the arguments of a %s", op))
		}
		req.Args = b
	}
	a, err := h.route(ctx, req)
	if err != nil || out == nil || len(a.Result) == 0 {
		return err
	}
	if err := json.Unmarshal(a.Result, out); err != nil {
		return errs.Wrap(errs.Internal, err, fmt.Sprintf("cluster: the result of a forwarded %s for session %q cannot be read; do all hosts run the same dsh version?", op, id))
	}
	return nil
}
