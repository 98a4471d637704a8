package tools

import (
	stdctx "context"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// executeTraced is execute inside an execute_tool span (the GenAI
// semantic conventions' name), counted in dsh.tool.calls.
func (s *Service) executeTraced(ctx stdctx.Context, at *dshctx.Context, call Call) (Result, error) {
	group := "serial"
	if s.parallelSafe(at, call.Name) {
		group = "parallel"
	}
	var span trace.Span
	if telemetry.Records(ctx) {
		ctx, span = telemetry.Start(ctx, "execute_tool "+call.Name, trace.WithAttributes(
			telemetry.AttrGenAIOperation.String("execute_tool"), telemetry.AttrToolName.String(call.Name),
			telemetry.AttrToolCallID.String(call.ID), telemetry.AttrAgent.String(call.AgentID), telemetry.AttrToolGroup.String(group)))
	} else {
		// A span that would not record: no name or attributes to build.
		ctx, span = telemetry.Start(ctx, "")
	}
	if telemetry.ContentOn() && span.IsRecording() {
		span.SetAttributes(telemetry.AttrGenAIToolArgs.String(string(call.Arguments)))
	}
	r, err := s.execute(ctx, at, call)
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "failed"
	case r.IsError:
		outcome = "error"
	}
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrOutcome.String(outcome))
		if telemetry.ContentOn() {
			span.SetAttributes(telemetry.AttrGenAIToolResult.String(r.Content))
		}
	}
	telemetry.End(span, err)
	if m := telemetry.M(); m != nil {
		m.ToolCalls.Add(1, call.Name, outcome)
	}
	return r, err
}

// askTraced asks the approval service inside a dsh.approval.ask span
// that says who answered and how long the call waited.
func askTraced(ctx stdctx.Context, svc *approval.Service, req approval.Request) (approval.Answer, error) {
	if !telemetry.Enabled() {
		return svc.Ask(ctx, req)
	}
	start := time.Now()
	ctx, span := telemetry.Start(ctx, "dsh.approval.ask", trace.WithAttributes(telemetry.AttrToolName.String(req.Tool)))
	ans, err := svc.Ask(ctx, req)
	wait := time.Since(start).Seconds()
	answerer := AnsweredByPerson
	switch {
	case err != nil, ans.Unattended:
		answerer = AnsweredByNobody
	}
	verdict := string(ans.Choice)
	if err != nil {
		verdict = "error"
	}
	span.SetAttributes(telemetry.AttrApproval.String(verdict), telemetry.AttrAnswerer.String(answerer), telemetry.AttrWait.Float64(wait))
	telemetry.End(span, err)
	if m := telemetry.M(); m != nil {
		m.Approvals.Add(1, verdict, answerer)
		m.ApprovalWait.Record(wait, verdict, answerer)
	}
	return ans, err
}
