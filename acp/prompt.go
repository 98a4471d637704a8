package acp

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/google/uuid"
)

// MethodSteering is the extension method that hands a message to the
// running turn (advertised in agentCapabilities._meta.steering).
const MethodSteering = "_session/steering"

// agentSourceOf is the source of a prompt that came as JSON-RPC call
// rpcID: the editor (named by its initialize clientInfo) on behalf of
// the configured user.
func (s *Server) agentSourceOf(rpcID string) sessions.Source {
	s.mu.Lock()
	editor := s.editor
	s.mu.Unlock()
	if editor == "" {
		editor = "editor"
	}
	src := sessions.Source{Kind: SourceACP, RPCID: rpcID, Entry: "acp",
		Principal: sessions.Principal{Kind: "editor", ID: editor, Tenant: s.opts.User.Tenant}}
	if !s.opts.User.IsZero() {
		user := s.opts.User
		src.OnBehalfOf = &user
	}
	return src
}

// requestID is the prompt's request id: the JSON-RPC id the wire filter
// put in _meta, scoped to the connection (ids start over with each
// connection, and a session outlives connections: an id alone would pass a
// new prompt off as a retry of an old one). A fresh id when the client's
// transport bypassed the filter.
func (s *Server) requestID(meta map[string]any) string {
	if id, ok := meta[metaRequestID].(string); ok && id != "" {
		return "acp-" + s.connID + "-" + id
	}
	return "acp-" + uuid.NewString()
}

// Prompt delivers the prompt through the session service and answers
// when the turn that took it ends, once the turn's updates went out. A
// prompt sent while a turn runs is queued behind it.
func (s *Server) Prompt(_ stdctx.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	st, err := s.get(p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, rpcErr(err)
	}
	pc, err := contentOf(p.Prompt, st.cwd, s.opts.Accepts)
	if err != nil {
		return acp.PromptResponse{}, rpcErr(err)
	}
	rid := s.requestID(p.Meta)
	if rest, ok := strings.CutPrefix(pc.Text, "/steer "); ok && pc.Parts == nil {
		_, err := s.opts.Sessions.Steer(st.ctx, string(st.id), sessions.PromptRequest{RequestID: rid, Content: rest, Source: s.agentSourceOf(rid)})
		if r, dropped := st.droppedAnswer(rid, err); dropped {
			return r, nil
		}
		if err != nil {
			return acp.PromptResponse{}, rpcErr(st.closedIfGone(err))
		}
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	}
	if pc.Parts == nil {
		if r, ok, err := st.sessionCommand(pc.Text, rid); ok {
			return r, err
		}
	}
	// The SDK cancels a prompt's ctx when the next prompt of the session
	// arrives; a queued prompt must not take the running one down, so the
	// delivery and the wait heed the session, not the request.
	turn, err := s.opts.Sessions.Prompt(st.ctx, string(st.id), deliveryOf(rid, pc, s.agentSourceOf(rid)))
	if r, dropped := st.droppedAnswer(rid, err); dropped {
		return r, nil
	}
	if err != nil {
		return acp.PromptResponse{}, rpcErr(st.closedIfGone(err))
	}
	res, err := st.wait(turn)
	if err != nil {
		return acp.PromptResponse{}, rpcErr(err)
	}
	r, err := stopOf(res)
	if err != nil {
		return r, err
	}
	return withOutcome(r, res.RequestOutcome), nil
}

// deliveryOf is the request that delivers a prompt's content: its text,
// or, for a prompt with images or files, its parts alone. The parts carry
// the prompt's text blocks in their places already, and the session
// controller puts a request's Content before its parts: both would give
// the model (and the session's title) the text twice.
func deliveryOf(rid string, pc promptContent, src sessions.Source) sessions.PromptRequest {
	if pc.Parts != nil {
		return sessions.PromptRequest{RequestID: rid, Parts: pc.Parts, Source: src}
	}
	return sessions.PromptRequest{RequestID: rid, Content: pc.Text, Source: src}
}

// stopOf maps what became of a prompt onto the answer's stopReason: the
// end of the turn it ran in, or cancelled when a cancel dropped it first.
func stopOf(res sessions.TurnResult) (acp.PromptResponse, error) {
	if !res.Ran() {
		if res.Outcome == sessions.FateDropped {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		// Refused or expired: Prompt answers those itself, unless the
		// record came from a retry of the same request id.
		return acp.PromptResponse{}, rpcErr(errs.New(sessions.PromptRejected, fmt.Sprintf("the prompt was %s: %s", res.Outcome, res.Message)).WithReason(res.Reason))
	}
	switch end := res.End; end.Reason {
	case sessions.EndCompleted:
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case sessions.EndMaxTokens:
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTokens}, nil
	case sessions.EndAborted, sessions.EndDisposed, "":
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	default:
		if strings.Contains(end.Error, string(sessions.TooManySteps)) {
			return acp.PromptResponse{StopReason: acp.StopReasonMaxTurnRequests}, nil
		}
		// The model declined: ACP's refusal, not a failure of the agent.
		if strings.Contains(end.Error, string(llm.Refused)) {
			return acp.PromptResponse{StopReason: acp.StopReasonRefusal}, nil
		}
		return acp.PromptResponse{}, &acp.RequestError{Code: CodeTurnFailed, Message: "the turn failed: " + end.Error,
			Data: map[string]any{"code": "AGENT_TURN_FAILED", "reason": end.Reason, "message": end.Error}}
	}
}

// wait waits for what became of turn's prompt (its turn ended, or a
// cancel dropped it), then for the pump to have sent the updates up to
// that point, so the answer comes after them.
func (st *conv) wait(turn sessions.Turn) (sessions.TurnResult, error) {
	res, err := turn.Wait(st.ctx)
	if st.ctx.Err() != nil {
		return sessions.TurnResult{}, errs.New(sessions.Closed, fmt.Sprintf("session %q closed before the turn ended", st.id))
	}
	if err != nil {
		return sessions.TurnResult{}, st.closedIfGone(err)
	}
	seq := res.Seq
	if res.End != nil {
		seq = res.End.Seq
	}
	st.waitForwarded(seq)
	return res, nil
}

// closedIfGone is err as SESSION_CLOSED when the service no longer has
// the session open (another client closed it, or dsh is stopping) or the
// connection is closing it: the session is this connection's, so "not
// found" would send the editor looking for the wrong fault.
func (st *conv) closedIfGone(err error) error {
	if !errs.HasCode(err, sessions.NotFound) && st.ctx.Err() == nil {
		return err
	}
	return errs.Wrap(sessions.Closed, err, fmt.Sprintf("session %q is closed; open it with session/load or session/resume to go on", st.id))
}

// cancelTurn ends the running turn and drops the queued prompts; each
// prompt waiting then answers cancelled, from what became of it.
func (st *conv) cancelTurn() {
	if err := st.srv.opts.Sessions.Cancel(sessions.WithActor(st.ctx, "the ACP client"), string(st.id)); err != nil {
		st.srv.log.Debug("cancel", "session", st.id, "error", err)
	}
}

type steeringParams struct {
	SessionID acp.SessionId   `json:"sessionId"`
	Prompt    json.RawMessage `json:"prompt"`
}

// HandleExtensionMethod serves _session/steering: {sessionId, prompt}
// where prompt is a string or content blocks, handed to the running turn
// through the session controller.
func (s *Server) HandleExtensionMethod(ctx stdctx.Context, method string, params json.RawMessage) (any, error) {
	if method != MethodSteering {
		return nil, acp.NewMethodNotFound(method)
	}
	var p steeringParams
	if err := json.Unmarshal(params, &p); err != nil || p.SessionID == "" {
		return nil, acp.NewInvalidParams(map[string]any{"details": "expected {sessionId, prompt}: prompt is a string or an array of content blocks"})
	}
	st, err := s.get(p.SessionID)
	if err != nil {
		return nil, rpcErr(err)
	}
	var pc promptContent
	if json.Unmarshal(p.Prompt, &pc.Text) != nil {
		var blocks []acp.ContentBlock
		if err := json.Unmarshal(p.Prompt, &blocks); err != nil {
			return nil, acp.NewInvalidParams(map[string]any{"details": "prompt is neither a string nor content blocks"})
		}
		if pc, err = contentOf(blocks, st.cwd, s.opts.Accepts); err != nil {
			return nil, rpcErr(err)
		}
	}
	if strings.TrimSpace(pc.Text) == "" && pc.Parts == nil {
		return nil, rpcErr(errs.New(BadParams, "the steering prompt is empty"))
	}
	rid := "acp-steer-" + uuid.NewString()
	turn, err := s.opts.Sessions.Steer(ctx, string(st.id), deliveryOf(rid, pc, s.agentSourceOf(rid)))
	if err != nil {
		return nil, rpcErr(st.closedIfGone(err))
	}
	return map[string]any{"messageId": turn.MessageID}, nil
}

// announce tells a new client what the session offers: its commands,
// the server's own and the agent's prompt commands (commands.go).
func (st *conv) announce() {
	st.send(acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{SessionUpdate: "available_commands_update",
		AvailableCommands: append([]acp.AvailableCommand{{
			Name: "steer", Description: "hand a message to the running turn instead of queueing it",
			Input: &acp.AvailableCommandInput{Unstructured: &acp.UnstructuredCommandInput{Hint: "what the agent should take into account now"}},
		}}, append(append([]acp.AvailableCommand(nil), sessionCommands...), st.promptCommands()...)...)}})
}
