package openai

import (
	"encoding/json"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

type wireFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function wireFunctionCall `json:"function"`
}

type wireMessage struct {
	Role string `json:"role"`
	// Content is a *string (null for an assistant message that only
	// calls tools) or, for a user message with images, []wirePart.
	Content          any            `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string         `json:"tool_call_id,omitempty"`
}

type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type wireTool struct {
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireThinking struct {
	Type string `json:"type"`
}

type wireRequest struct {
	Model           string         `json:"model"`
	Messages        []wireMessage  `json:"messages"`
	Tools           []wireTool     `json:"tools,omitempty"`
	Stream          bool           `json:"stream"`
	StreamOptions   map[string]any `json:"stream_options"`
	MaxTokens       int            `json:"max_tokens,omitempty"`
	Temperature     *float64       `json:"temperature,omitempty"`
	Thinking        *wireThinking  `json:"thinking,omitempty"`
	ReasoningEffort string         `json:"reasoning_effort,omitempty"`
}

// body renders the request in the wire format.
func (p *Provider) body(req llm.Request) ([]byte, error) {
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	if model == "" {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf(
			"%s: no model for agent %q; set model: on the agent or in the provider's config", p.name, req.AgentID))
	}
	w := wireRequest{
		Model: model, Stream: true, StreamOptions: map[string]any{"include_usage": true},
		MaxTokens: req.MaxTokens, Temperature: req.Temperature, ReasoningEffort: p.cfg.ReasoningEffort,
	}
	if w.MaxTokens == 0 {
		w.MaxTokens = p.cfg.MaxTokens
	}
	if w.Temperature == nil {
		w.Temperature = p.cfg.Temperature
	}
	if p.cfg.Thinking != nil {
		w.Thinking = &wireThinking{Type: "disabled"}
		if *p.cfg.Thinking {
			w.Thinking.Type = "enabled"
		}
	}
	if req.System != "" {
		w.Messages = append(w.Messages, wireMessage{Role: "system", Content: str(req.System)})
	}
	// Images a tool returned wait in after for the end of the run of tool
	// messages: a user message may not come between the answers to one
	// assistant message's calls.
	var after []wirePart
	for i, m := range req.History.All() {
		if m.Role != llm.RoleTool && len(after) > 0 {
			w.Messages = append(w.Messages, imagesMessage(after))
			after = nil
		}
		at := parts.Where{Provider: p.name, Model: model, Message: i}
		if m.HasParts() && m.Role != llm.RoleAssistant {
			wm, images, err := p.partsMessage(m, at, model)
			if err != nil {
				return nil, err
			}
			w.Messages = append(w.Messages, wm)
			after = append(after, images...)
			continue
		}
		w.Messages = append(w.Messages, p.message(m))
	}
	if len(after) > 0 {
		w.Messages = append(w.Messages, imagesMessage(after))
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		w.Tools = append(w.Tools, wireTool{Type: "function", Function: wireFunction{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	return json.Marshal(w)
}

func (p *Provider) message(m llm.Message) wireMessage {
	switch m.Role {
	case llm.RoleAssistant:
		out := wireMessage{Role: "assistant", Content: str(m.Content)}
		for _, c := range m.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, wireToolCall{ID: c.ID, Type: "function", Function: wireFunctionCall{Name: c.Name, Arguments: c.Arguments}})
		}
		if len(out.ToolCalls) > 0 {
			if m.Content == "" {
				out.Content = nil
			}
			if p.flavor.sendReasoning {
				out.ReasoningContent = m.Reasoning
			}
		}
		return out
	case llm.RoleTool:
		return wireMessage{Role: "tool", Content: str(m.Content), ToolCallID: m.ToolCallID}
	}
	return wireMessage{Role: "user", Content: str(m.Content)}
}

func str(s string) *string { return &s }
