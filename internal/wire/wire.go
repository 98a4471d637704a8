// Package wire converts between dsh's Go event types and the messages of
// sdk/proto/pluginv1/events.proto. It is the one hand-written piece of the
// plugin-binary contract: the messages themselves are generated, and the
// host's bridge only picks the pair of functions of each event here.
//
// To… functions give a payload or result as it goes to a plugin; Apply…
// functions take a plugin's replacement and apply it to the original,
// keeping what does not travel (the agent itself, above all) and changing
// only what EVENTS.md lists as changeable.
package wire

import (
	"encoding/json"
	"time"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
)

func message(m llm.Message) *pluginv1.Message {
	out := &pluginv1.Message{Id: m.ID, Role: string(m.Role), Content: m.Content, Reasoning: m.Reasoning,
		ReasoningSignature: m.ReasoningSignature, ToolCallId: m.ToolCallID, IsError: m.IsError, RequestId: m.RequestID}
	if len(m.ToolCalls) > 0 {
		out.ToolCalls = make([]*pluginv1.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			out.ToolCalls[i] = toolCall(c)
		}
	}
	return out
}

func messageFrom(m *pluginv1.Message) llm.Message {
	out := llm.Message{ID: m.GetId(), Role: llm.Role(m.GetRole()), Content: m.GetContent(), Reasoning: m.GetReasoning(),
		ReasoningSignature: m.GetReasoningSignature(), ToolCallID: m.GetToolCallId(), IsError: m.GetIsError(), RequestID: m.GetRequestId()}
	if calls := m.GetToolCalls(); len(calls) > 0 {
		out.ToolCalls = make([]llm.ToolCall, len(calls))
		for i, c := range calls {
			out.ToolCalls[i] = toolCallFrom(c)
		}
	}
	return out
}

func messages(ms []llm.Message) []*pluginv1.Message {
	out := make([]*pluginv1.Message, len(ms))
	for i, m := range ms {
		out[i] = message(m)
	}
	return out
}

func messagesFrom(ms []*pluginv1.Message) []llm.Message {
	out := make([]llm.Message, len(ms))
	for i, m := range ms {
		out[i] = messageFrom(m)
	}
	return out
}

func toolCall(c llm.ToolCall) *pluginv1.ToolCall {
	return &pluginv1.ToolCall{Id: c.ID, Name: c.Name, Arguments: c.Arguments}
}

func toolCallFrom(c *pluginv1.ToolCall) llm.ToolCall {
	return llm.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments()}
}

func usage(u llm.Usage) *pluginv1.Usage {
	return &pluginv1.Usage{InputTokens: int32(u.InputTokens), OutputTokens: int32(u.OutputTokens), ReasoningTokens: int32(u.ReasoningTokens),
		CacheHitTokens: int32(u.CacheHitTokens), CacheMissTokens: int32(u.CacheMissTokens)}
}

func usageFrom(u *pluginv1.Usage) llm.Usage {
	return llm.Usage{InputTokens: int(u.GetInputTokens()), OutputTokens: int(u.GetOutputTokens()), ReasoningTokens: int(u.GetReasoningTokens()),
		CacheHitTokens: int(u.GetCacheHitTokens()), CacheMissTokens: int(u.GetCacheMissTokens())}
}

func source(s agentcontroller.Source) *pluginv1.Source {
	return &pluginv1.Source{Kind: string(s.Kind), RpcId: s.RPCID, Unattended: s.Unattended,
		Principal: principal(s.Principal), Entry: s.Entry, OnBehalfOf: principalPtr(s.OnBehalfOf)}
}

// principal is nil for no principal, so an anonymous sender is unset on
// the wire as it is in Go.
func principal(p llm.Principal) *pluginv1.Principal {
	if p.IsZero() {
		return nil
	}
	return &pluginv1.Principal{Kind: p.Kind, Id: p.ID, Tenant: p.Tenant}
}

func principalPtr(p *llm.Principal) *pluginv1.Principal {
	if p == nil {
		return nil
	}
	return &pluginv1.Principal{Kind: p.Kind, Id: p.ID, Tenant: p.Tenant}
}

func provenances(ps []llm.Provenance) []*pluginv1.Provenance {
	if len(ps) == 0 {
		return nil
	}
	out := make([]*pluginv1.Provenance, len(ps))
	for i, p := range ps {
		out[i] = &pluginv1.Provenance{Principal: principal(p.Principal), Entry: p.Entry, OnBehalfOf: principalPtr(p.OnBehalfOf)}
	}
	return out
}

func toolSpecs(ts []llm.ToolSpec) []*pluginv1.ToolSpec {
	out := make([]*pluginv1.ToolSpec, len(ts))
	for i, t := range ts {
		out[i] = &pluginv1.ToolSpec{Name: t.Name, Description: t.Description, Parameters: string(t.Parameters)}
	}
	return out
}

func toolSpecsFrom(ts []*pluginv1.ToolSpec) []llm.ToolSpec {
	out := make([]llm.ToolSpec, len(ts))
	for i, t := range ts {
		out[i] = llm.ToolSpec{Name: t.GetName(), Description: t.GetDescription()}
		if p := t.GetParameters(); p != "" {
			out[i].Parameters = json.RawMessage(p)
		}
	}
	return out
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}
