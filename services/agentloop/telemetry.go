package agentloop

import (
	stdctx "context"
	"encoding/json"
	"time"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// startTurn returns the context a turn runs in and its dsh.turn span. The
// span continues the trace of the turn's first message (its admission,
// left by the agent controller) and links the others, so a prompt is one
// trace from its entry point to its answer. Off, it returns Background and
// a no-op span.
func (a *ReactLoopAgent) startTurn(msgs []llm.Message) (stdctx.Context, trace.Span) {
	base := stdctx.Background()
	if !telemetry.Enabled() {
		_, span := telemetry.Start(base, "")
		return base, span
	}
	var links []trace.Link
	parent := base
	for _, m := range msgs {
		sc, ok := telemetry.TakeHandoff(m.ID)
		if !ok {
			continue
		}
		if !trace.SpanContextFromContext(parent).IsValid() {
			parent = trace.ContextWithRemoteSpanContext(base, sc)
		} else {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	var opts []trace.SpanStartOption
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	_, span := telemetry.Start(parent, "dsh.turn", opts...)
	if !span.IsRecording() {
		if !span.SpanContext().IsValid() {
			// Sampling 0 made no span: there is nothing for the
			// turn's children to continue.
			return base, span
		}
		// The sampled-out span goes on, so the children stay out too.
		return trace.ContextWithSpan(base, span), span
	}
	span.SetAttributes(telemetry.AttrAgent.String(a.id), telemetry.AttrSession.String(a.sess.ID()),
		attribute.Int("dsh.turn.messages", len(msgs)))
	if telemetry.ContentOn() {
		if b, err := json.Marshal(msgs); err == nil {
			span.SetAttributes(telemetry.AttrGenAIPrompt.String(string(b)))
		}
	}
	// The context keeps the span, not the parent's cancellation: a turn
	// outlives the request that queued it.
	return trace.ContextWithSpan(base, span), span
}

// endTurn ends the turn's span with how the turn ended.
func (a *ReactLoopAgent) endTurn(span trace.Span, turn int, reason string, err error) {
	if !span.IsRecording() {
		span.End()
		if m := telemetry.M(); m != nil {
			m.Turns.Add(1, a.id, reason)
		}
		return
	}
	span.SetAttributes(telemetry.AttrTurn.Int(turn), telemetry.AttrOutcome.String(reason))
	if reason != ReasonError {
		err = nil
	}
	if m := telemetry.M(); m != nil {
		m.Turns.Add(1, a.id, reason)
	}
	telemetry.End(span, err)
}

// startStep starts a step's dsh.step span under the turn's.
func (a *ReactLoopAgent) startStep(ctx stdctx.Context, turn, step int) (stdctx.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, trace.SpanFromContext(stdctx.Background())
	}
	if m := telemetry.M(); m != nil {
		m.Steps.Add(1, a.id)
	}
	ctx, span := telemetry.Start(ctx, "dsh.step")
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrAgent.String(a.id), telemetry.AttrTurn.Int(turn), telemetry.AttrStep.Int(step))
	}
	return ctx, span
}

func (a *ReactLoopAgent) endStep(span trace.Span, err error) { telemetry.End(span, err) }

// clientKind is the option of the model's span, made once.
var clientKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// modelSpan is a model request's span: the GenAI semantic conventions'
// "chat {model}" client span with tokens, finish reason and the time to
// the first chunk.
type modelSpan struct {
	a               *ReactLoopAgent
	model, provider string
	span            trace.Span
	start           telemetry.Mono
	first           bool
}

func (a *ReactLoopAgent) startModel(ctx stdctx.Context, req llm.Request) (stdctx.Context, modelSpan) {
	name := "chat"
	if req.Model != "" && telemetry.Records(ctx) {
		name += " " + req.Model
	}
	ctx, span := telemetry.Start(ctx, name, clientKind...)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrGenAIOperation.String("chat"), telemetry.AttrGenAIProvider.String(req.Provider),
			telemetry.AttrGenAIRequestModel.String(req.Model), telemetry.AttrAgent.String(a.id))
		if req.MaxTokens > 0 {
			span.SetAttributes(telemetry.AttrGenAIMaxTokens.Int(req.MaxTokens))
		}
	}
	return ctx, modelSpan{a: a, model: req.Model, provider: req.Provider, span: span, start: telemetry.Now()}
}

// chunk notes a chunk's arrival; the first one's time is the time to
// first chunk.
func (m *modelSpan) chunk() {
	if m.first {
		return
	}
	m.first = true
	if m.span.IsRecording() {
		m.span.SetAttributes(telemetry.AttrTimeToFirstChunk.Float64(time.Duration(telemetry.Now() - m.start).Seconds()))
	}
}

func (m *modelSpan) end(asm *llm.Assembler, err error) {
	u := asm.Usage()
	finish, _ := asm.Finish()
	if m.span.IsRecording() {
		m.span.SetAttributes(
			telemetry.AttrGenAIInputTokens.Int(u.InputTokens), telemetry.AttrGenAIOutputTokens.Int(u.OutputTokens),
			telemetry.AttrGenAICachedTokens.Int(u.CacheHitTokens), telemetry.AttrGenAIResponseModel.String(m.model),
			telemetry.AttrGenAIFinish.StringSlice([]string{string(finish)}))
		if telemetry.ContentOn() {
			if b, err := json.Marshal(asm.Message()); err == nil {
				m.span.SetAttributes(telemetry.AttrGenAICompletion.String(string(b)))
			}
		}
	}
	telemetry.End(m.span, err)
	met := telemetry.M()
	if met == nil {
		return
	}
	met.ModelDuration.SinceMono(m.start, "chat", m.model, m.provider)
	if u.InputTokens == 0 && u.OutputTokens == 0 && u.CacheHitTokens == 0 {
		return
	}
	p := m.a.principal()
	principal := m.a.principalAttr(p)
	for _, t := range [...]struct {
		kind string
		n    int
	}{{"input", u.InputTokens}, {"output", u.OutputTokens}, {"cached", u.CacheHitTokens}} {
		if t.n > 0 {
			met.Tokens.Add(int64(t.n), m.a.id, m.model, principal, p.Tenant, t.kind)
		}
	}
	// Priced as the usage service prices the step's session event, so
	// the metric and /usage agree.
	cfg := &m.a.loop.cfg
	model := m.model
	if model == "" && cfg.DefaultModel != nil {
		model = cfg.DefaultModel(m.provider)
	}
	if price, ok := cfg.Pricing.Lookup(m.provider, model); ok {
		met.Cost.Add(price.Cost(u), m.a.id, model, principal, p.Tenant, cfg.Pricing.CurrencyName())
	}
}

// principalAttr is p as the principal attribute, kind:id, kept while the
// principal stays the same so a step does not build the string anew.
func (a *ReactLoopAgent) principalAttr(p llm.Principal) string {
	if a.telPrincipal.p != p {
		a.telPrincipal.p, a.telPrincipal.s = p, p.Kind+":"+p.ID
	}
	return a.telPrincipal.s
}

// principal is who the turn acts for: its first source's principal.
func (a *ReactLoopAgent) principal() llm.Principal {
	if len(a.sources) == 0 {
		return llm.Principal{}
	}
	return a.sources[0].Principal
}
