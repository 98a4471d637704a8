package telemetry

import "time"

// Metrics are dsh's instruments. Reach them through M, which is nil when
// telemetry is off: callers check it first. Each instrument's attribute
// keys are fixed; a measurement passes their values in the order the
// field's comment gives.
type Metrics struct {
	// Inputs counts prompts offered to admission: entry_point, outcome
	// (admitted, refused, expired, failed).
	Inputs *Counter
	// AdmissionDuration is the time admission took: verdict.
	AdmissionDuration *Histogram
	// AdmissionHolds counts listeners that held a message (took time
	// before passing it on): event, dsh.listener.
	AdmissionHolds *Counter
	// Turns counts turns ended: agent, outcome. Steps the steps: agent.
	Turns *Counter
	Steps *Counter
	// Tokens counts tokens: agent, model, principal, tenant,
	// gen_ai.token.type (input, output, cached).
	Tokens *Counter
	// Cost is the priced cost in the pricing's currency: agent, model,
	// principal, tenant, currency.
	Cost *FloatCounter
	// ModelDuration is the model request's duration
	// (gen_ai.client.operation.duration): gen_ai.operation.name,
	// gen_ai.request.model, gen_ai.provider.name.
	ModelDuration *Histogram
	// ToolCalls counts tool calls: tool, outcome.
	ToolCalls *Counter
	// Approvals counts approvals asked and ApprovalWait is how long they
	// waited: verdict, answerer.
	Approvals    *Counter
	ApprovalWait *Histogram
	// PluginRestarts counts restarts of plugin binaries: plugin.
	PluginRestarts *Counter
	// SessionStore is the session store's latency: operation.
	SessionStore *Histogram
	// SSESubscribers is the number of attached event streams.
	SSESubscribers *UpDownCounter

	start time.Time
}

func newMetrics() *Metrics {
	return &Metrics{
		start:             time.Now(),
		Inputs:            &Counter{newFamily[atomicInt]("dsh.inputs", "Prompts offered to admission, by entry point and outcome.", "{input}", "entry_point", "outcome")},
		AdmissionDuration: &Histogram{newFamily[histCell]("dsh.admission.duration", "Time admission took to decide, by verdict.", "s", "verdict")},
		AdmissionHolds:    &Counter{newFamily[atomicInt]("dsh.admission.holds", "Admission listeners that held a message before passing it on.", "{hold}", "event", "dsh.listener")},
		Turns:             &Counter{newFamily[atomicInt]("dsh.turns", "Turns ended, by agent and outcome.", "{turn}", "agent", "outcome")},
		Steps:             &Counter{newFamily[atomicInt]("dsh.steps", "Steps run, by agent.", "{step}", "agent")},
		Tokens:            &Counter{newFamily[atomicInt]("dsh.tokens", "Model tokens, by agent, model, principal, tenant and type.", "{token}", "agent", "model", "principal", "tenant", "gen_ai.token.type")},
		Cost:              &FloatCounter{newFamily[atomicFloat]("dsh.cost", "Priced model cost, by agent, model, principal, tenant and currency.", "{currency}", "agent", "model", "principal", "tenant", "currency")},
		ModelDuration:     &Histogram{newFamily[histCell]("gen_ai.client.operation.duration", "Model request duration.", "s", "gen_ai.operation.name", "gen_ai.request.model", "gen_ai.provider.name")},
		ToolCalls:         &Counter{newFamily[atomicInt]("dsh.tool.calls", "Tool calls, by tool and outcome.", "{call}", "tool", "outcome")},
		Approvals:         &Counter{newFamily[atomicInt]("dsh.approvals", "Approvals asked, by verdict and answerer.", "{approval}", "verdict", "answerer")},
		ApprovalWait:      &Histogram{newFamily[histCell]("dsh.approval.wait", "Time an approval waited for its answer.", "s", "verdict", "answerer")},
		PluginRestarts:    &Counter{newFamily[atomicInt]("dsh.plugin.restarts", "Restarts of plugin binaries, by plugin.", "{restart}", "plugin")},
		SessionStore:      &Histogram{newFamily[histCell]("dsh.session.store.duration", "Session store latency, by operation.", "s", "operation")},
		SSESubscribers:    &UpDownCounter{newFamily[atomicInt]("dsh.sse.subscribers", "Event streams attached over Server-Sent Events.", "{subscriber}")},
	}
}

// Read reads every instrument: what a metric reader's producer hands on
// at each collection. A nil m reads nothing.
func (m *Metrics) Read() []Reading {
	if m == nil {
		return nil
	}
	s := m.start
	return []Reading{
		readInt(KindCounter, s, &m.Inputs.f),
		readHist(s, &m.AdmissionDuration.f),
		readInt(KindCounter, s, &m.AdmissionHolds.f),
		readInt(KindCounter, s, &m.Turns.f),
		readInt(KindCounter, s, &m.Steps.f),
		readInt(KindCounter, s, &m.Tokens.f),
		readFloat(s, &m.Cost.f),
		readHist(s, &m.ModelDuration.f),
		readInt(KindCounter, s, &m.ToolCalls.f),
		readInt(KindCounter, s, &m.Approvals.f),
		readHist(s, &m.ApprovalWait.f),
		readInt(KindCounter, s, &m.PluginRestarts.f),
		readHist(s, &m.SessionStore.f),
		readInt(KindUpDownCounter, s, &m.SSESubscribers.f),
	}
}

// M returns the instruments, or nil when telemetry is off.
func M() *Metrics {
	if !on.Load() {
		return nil
	}
	if p := current.Load(); p != nil {
		return p.metrics
	}
	return nil
}
