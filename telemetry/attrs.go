package telemetry

import (
	stdctx "context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

const codesError = codes.Error

// Attribute keys dsh puts on its spans and metrics; docs/telemetry.md lists
// them per span. The gen_ai.* ones are the OpenTelemetry GenAI semantic
// conventions.
const (
	AttrAgent       = attribute.Key("dsh.agent")
	AttrSession     = attribute.Key("dsh.session")
	AttrEntryPoint  = attribute.Key("dsh.entry_point")
	AttrPrincipal   = attribute.Key("dsh.principal")
	AttrTenant      = attribute.Key("dsh.tenant")
	AttrRequestID   = attribute.Key("dsh.request_id")
	AttrMessageID   = attribute.Key("dsh.message_id")
	AttrMode        = attribute.Key("dsh.mode")
	AttrVerdict     = attribute.Key("dsh.admission.verdict")
	AttrReason      = attribute.Key("dsh.admission.reason")
	AttrListener    = attribute.Key("dsh.listener")
	AttrPassed      = attribute.Key("dsh.listener.passed")
	AttrHeldSeconds = attribute.Key("dsh.listener.held_seconds")
	AttrTurn        = attribute.Key("dsh.turn")
	AttrStep        = attribute.Key("dsh.step")
	AttrOutcome     = attribute.Key("dsh.outcome")
	AttrPlugin      = attribute.Key("dsh.plugin")
	AttrEvent       = attribute.Key("dsh.event")
	AttrHost        = attribute.Key("dsh.host")
	AttrHook        = attribute.Key("dsh.hook")
	AttrStage       = attribute.Key("dsh.hook.stage")

	AttrToolName   = attribute.Key("gen_ai.tool.name")
	AttrToolCallID = attribute.Key("gen_ai.tool.call.id")
	AttrToolGroup  = attribute.Key("dsh.tool.group")
	AttrSandbox    = attribute.Key("dsh.tool.sandbox")
	AttrApproval   = attribute.Key("dsh.approval.verdict")
	AttrAnswerer   = attribute.Key("dsh.approval.answerer")
	AttrWait       = attribute.Key("dsh.approval.wait_seconds")

	AttrGenAIOperation     = attribute.Key("gen_ai.operation.name")
	AttrGenAIProvider      = attribute.Key("gen_ai.provider.name")
	AttrGenAIRequestModel  = attribute.Key("gen_ai.request.model")
	AttrGenAIResponseModel = attribute.Key("gen_ai.response.model")
	AttrGenAIInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	AttrGenAIOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	AttrGenAICachedTokens  = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	AttrGenAIFinish        = attribute.Key("gen_ai.response.finish_reasons")
	AttrGenAIMaxTokens     = attribute.Key("gen_ai.request.max_tokens")
	AttrTimeToFirstChunk   = attribute.Key("gen_ai.response.time_to_first_chunk")
	AttrGenAIPrompt        = attribute.Key("gen_ai.input.messages")
	AttrGenAICompletion    = attribute.Key("gen_ai.output.messages")
	AttrGenAIToolArgs      = attribute.Key("gen_ai.tool.call.arguments")
	AttrGenAIToolResult    = attribute.Key("gen_ai.tool.call.result")

	AttrMCPServer = attribute.Key("mcp.server")
	AttrMCPMethod = attribute.Key("mcp.method.name")
	AttrRPCMethod = attribute.Key("rpc.method")
)

func httpAttrs(r *http.Request) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("http.request.method", r.Method),
		attribute.String("url.path", r.URL.Path),
	}
}

func httpStatus(code int) attribute.KeyValue {
	return attribute.Int("http.response.status_code", code)
}

// LogArgs returns trace_id and span_id of ctx's span as hclog key/value
// pairs, to put log lines beside their trace; nil when there is none.
func LogArgs(ctx stdctx.Context) []any {
	if !on.Load() || ctx == nil {
		return nil
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}
