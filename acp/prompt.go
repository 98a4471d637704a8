package acp

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/google/uuid"
)

// MethodSteering is the extension method that hands a message to the
// running turn (advertised in agentCapabilities._meta.steering).
const MethodSteering = "_session/steering"

func agentSourceOf(rpcID string) agentcontroller.Source {
	return agentcontroller.Source{Kind: SourceACP, RPCID: rpcID}
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

// Prompt delivers the prompt through the session controller and answers
// when the turn that took it ends. A prompt sent while a turn runs is
// queued behind it.
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
		_, err := st.s.Steer(st.ctx, sessions.PromptRequest{RequestID: rid, Content: rest, Source: agentSourceOf(rid)})
		if r, dropped := droppedAnswer(st, rid, err); dropped {
			return r, nil
		}
		if err != nil {
			return acp.PromptResponse{}, rpcErr(err)
		}
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	}
	st.mu.Lock()
	cancelled := st.cancelled
	st.mu.Unlock()
	// The SDK cancels a prompt's ctx when the next prompt of the session
	// arrives; a queued prompt must not take the running one down, so the
	// delivery and the wait heed the session, not the request.
	msgID, err := st.s.Prompt(st.ctx, deliveryOf(rid, pc))
	if r, dropped := droppedAnswer(st, rid, err); dropped {
		return r, nil
	}
	if err != nil {
		return acp.PromptResponse{}, rpcErr(err)
	}
	end, err := st.waitTurn(msgID, cancelled)
	if err != nil {
		return acp.PromptResponse{}, rpcErr(err)
	}
	r, err := stopOf(end)
	if err != nil {
		return r, err
	}
	return withOutcome(st, rid, r), nil
}

// deliveryOf is the request that delivers a prompt's content: its text,
// or, for a prompt with images or files, its parts alone. The parts carry
// the prompt's text blocks in their places already, and the session
// controller puts a request's Content before its parts: both would give
// the model (and the session's title) the text twice.
func deliveryOf(rid string, pc promptContent) sessions.PromptRequest {
	if pc.Parts != nil {
		return sessions.PromptRequest{RequestID: rid, Parts: pc.Parts, Source: agentSourceOf(rid)}
	}
	return sessions.PromptRequest{RequestID: rid, Content: pc.Text, Source: agentSourceOf(rid)}
}

// stopOf maps a turn's end onto the answer's stopReason.
func stopOf(end turnEnd) (acp.PromptResponse, error) {
	switch end.reason {
	case agentloop.ReasonCompleted:
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case agentloop.ReasonMaxTokens:
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTokens}, nil
	case agentloop.ReasonAborted, agentloop.ReasonDisposed, "":
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	if strings.Contains(end.err, string(agentloop.TooManySteps)) {
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTurnRequests}, nil
	}
	return acp.PromptResponse{}, &acp.RequestError{Code: CodeTurnFailed, Message: "the turn failed: " + end.err,
		Data: map[string]any{"code": "AGENT_TURN_FAILED", "reason": end.reason, "message": end.err}}
}

// waitTurn waits for the end of the turn that took message msgID; a
// cancel (the cancelled channel closes) ends the wait with "" (cancelled)
// once every update of the cancelled turn went out.
func (st *conv) waitTurn(msgID string, cancelled chan struct{}) (turnEnd, error) {
	for {
		st.mu.Lock()
		turn, seen := st.turnOf[msgID]
		end, ended := st.ended[turn]
		dropped := st.dropped[msgID]
		ch := st.changed
		st.mu.Unlock()
		if seen && ended {
			return end, nil
		}
		if dropped {
			return turnEnd{reason: agentloop.ReasonAborted}, nil
		}
		select {
		case <-ch:
		case <-cancelled:
			return turnEnd{}, nil
		case <-st.ctx.Done():
			return turnEnd{}, errs.New(sessions.Closed, fmt.Sprintf("session %q closed before the turn ended", st.id))
		}
	}
}

// cancelTurn ends the running turn and drops the queued prompts; once the
// agent is idle and its last events went out, every prompt waiting
// answers cancelled.
func (st *conv) cancelTurn() {
	// The prompts sent before the cancel answer cancelled; one sent while
	// it runs is not the cancel's business.
	st.mu.Lock()
	cancelled := st.cancelled
	st.cancelled = make(chan struct{})
	st.mu.Unlock()
	if err := st.s.Cancel(st.ctx); err != nil {
		st.srv.log.Debug("cancel", "session", st.id, "error", err)
	}
	st.waitForwarded(int64(st.s.Log().Len()))
	close(cancelled)
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
	id, err := st.s.Steer(ctx, deliveryOf(rid, pc))
	if err != nil {
		return nil, rpcErr(err)
	}
	return map[string]any{"messageId": id}, nil
}

// announce tells a new client what the session offers: its commands,
// the server's own and the agent's prompt commands (commands.go).
func (st *conv) announce() {
	st.send(acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{SessionUpdate: "available_commands_update",
		AvailableCommands: append([]acp.AvailableCommand{{
			Name: "steer", Description: "hand a message to the running turn instead of queueing it",
			Input: &acp.AvailableCommandInput{Unstructured: &acp.UnstructuredCommandInput{Hint: "what the agent should take into account now"}},
		}}, st.promptCommands()...)}})
}
