package acp

import (
	stdctx "context"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// The options of a permission request, and the answers they stand for.
const (
	optAllowOnce   = "allow-once"
	optAllowAlways = "allow-always"
	optReject      = "reject"
)

var permissionOptions = []acp.PermissionOption{
	{OptionId: optAllowOnce, Name: "Allow once", Kind: acp.PermissionOptionKindAllowOnce},
	{OptionId: optAllowAlways, Name: "Allow for this session", Kind: acp.PermissionOptionKindAllowAlways},
	{OptionId: optReject, Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
}

// ask puts an approval question to the client as
// session/request_permission; the question's ctx ends when it is settled
// otherwise (withdrawn by a cancel, or answered by another client).
func (st *conv) ask(q *live.Question) {
	ctx, cancel := stdctx.WithCancel(st.ctx)
	st.mu.Lock()
	st.asks++
	mine := st.asks
	st.questions[q.ID], st.askedBy[q.ID] = cancel, mine
	st.mu.Unlock()
	st.spawn(func() {
		defer func() {
			st.mu.Lock()
			if st.askedBy[q.ID] == mine {
				delete(st.questions, q.ID)
				delete(st.askedBy, q.ID)
			}
			st.mu.Unlock()
			cancel()
		}()
		req := q.Request
		title, locs, content, raw := st.describe(llm.ToolCall{ID: req.CallID, Name: req.Tool, Arguments: string(req.Arguments)})
		if req.Summary != "" {
			title = req.Summary
		}
		kind := kindOf(req.Tool)
		tc := acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(req.CallID), Title: &title, Kind: &kind, Locations: locs, Content: content, RawInput: raw}
		var meta map[string]any
		if req.Reason != "" {
			meta = map[string]any{"reason": req.Reason}
		}
		resp, err := st.srv.conn.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: st.id, ToolCall: tc, Options: permissionOptions, Meta: meta})
		if err != nil {
			if ctx.Err() == nil {
				st.srv.log.Warn("session/request_permission failed; the call is denied", "session", st.id, "error", err)
				_ = st.stream.Answer(q.ID, approval.Answer{Choice: approval.Deny, Reason: "the editor did not answer the permission request"})
			}
			return
		}
		_ = st.stream.Answer(q.ID, answerOf(resp.Outcome))
	})
}

func answerOf(o acp.RequestPermissionOutcome) approval.Answer {
	if o.Selected != nil {
		switch o.Selected.OptionId {
		case optAllowOnce:
			return approval.Answer{Choice: approval.AllowOnce}
		case optAllowAlways:
			return approval.Answer{Choice: approval.AllowSession}
		}
		return approval.Answer{Choice: approval.Deny, Reason: "the person rejected it in the editor"}
	}
	return approval.Answer{Choice: approval.Deny, Reason: "the prompt was cancelled in the editor"}
}
