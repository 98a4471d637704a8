// Package anthropic is the model provider for Anthropic's Messages API with
// streaming (llm.anthropic): text, tool use with its input streamed as JSON
// fragments, extended thinking with its signature, stop reasons and usage.
// Like the OpenAI-compatible provider it decodes the event stream itself, so
// a cut stream is an error and the thinking signature round-trips exactly.
package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

// APIVersion is the anthropic-version header dsh speaks.
const APIVersion = "2023-06-01"

// DefaultMaxTokens is sent when neither the agent nor the config sets
// max_tokens; the API requires one.
const DefaultMaxTokens = 4096

// Config is the configuration of llm.anthropic.
type Config struct {
	httpx.Common `koanf:",squash"`
	// ThinkingBudget turns extended thinking on with that many tokens.
	ThinkingBudget int `koanf:"thinking_budget"`
}

var defaults = httpx.Defaults{ID: "llm.anthropic", Name: "anthropic", BaseURL: "https://api.anthropic.com", KeyEnv: "ANTHROPIC_API_KEY"}

// Plugin registers the provider with the llm service.
var Plugin = plugin.Register("llm.anthropic", `model provider "anthropic": the Messages API, streaming`, func(ctx *dshctx.Context, cfg Config) error {
	p, err := New(cfg, os.Getenv)
	if err != nil {
		return err
	}
	p.client.Log = ctx.Logger()
	svc, err := llm.Key.Get(ctx)
	if err != nil {
		return err
	}
	return svc.Register(ctx, p.name, p)
}, llm.Key).ProvidesModel(func(c Config) string {
	if c.Name != "" {
		return c.Name
	}
	return defaults.Name
})

// Provider streams messages.
type Provider struct {
	cfg    Config
	name   string
	url    string
	header http.Header
	client *httpx.Client
}

// New builds a provider; getenv reads the API key.
func New(cfg Config, getenv func(string) string) (*Provider, error) {
	if cfg.ThinkingBudget < 0 {
		return nil, errs.New(errs.InvalidArgument, "llm.anthropic: thinking_budget cannot be negative")
	}
	s, err := cfg.Resolve(defaults, getenv)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	header.Set("anthropic-version", APIVersion)
	if s.Key != "" {
		header.Set("x-api-key", s.Key)
	}
	return &Provider{cfg: cfg, name: s.Name, url: s.BaseURL + "/v1/messages", header: cfg.Header(header), client: s.Client}, nil
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	// Content is a tool result's: its text, or its blocks when it holds
	// more than text.
	Content any     `json:"content,omitempty"`
	IsError bool    `json:"is_error,omitempty"`
	Source  *source `json:"source,omitempty"`
	// Title names a document for the model.
	Title string `json:"title,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type request struct {
	Model       string    `json:"model"`
	MaxTokens   int       `json:"max_tokens"`
	System      string    `json:"system,omitempty"`
	Messages    []message `json:"messages"`
	Tools       []tool    `json:"tools,omitempty"`
	Stream      bool      `json:"stream"`
	Temperature *float64  `json:"temperature,omitempty"`
	Thinking    *thinking `json:"thinking,omitempty"`
}

// body renders the request. Tool results travel in user messages, and
// consecutive messages of one role are merged, as the API requires roles to
// alternate.
func (p *Provider) body(req llm.Request) ([]byte, error) {
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	if model == "" {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf(
			"%s: no model for agent %q; set model: on the agent or in the provider's config", p.name, req.AgentID))
	}
	r := request{Model: model, MaxTokens: req.MaxTokens, System: req.System, Stream: true, Temperature: req.Temperature}
	if r.MaxTokens == 0 {
		r.MaxTokens = p.cfg.MaxTokens
	}
	if r.MaxTokens == 0 {
		r.MaxTokens = DefaultMaxTokens
	}
	if r.Temperature == nil {
		r.Temperature = p.cfg.Temperature
	}
	if p.cfg.ThinkingBudget > 0 {
		r.Thinking = &thinking{Type: "enabled", BudgetTokens: p.cfg.ThinkingBudget}
	}
	for i, m := range req.History.All() {
		role, blocks, err := p.convert(m, parts.Where{Provider: p.name, Model: model, Message: i})
		if err != nil {
			return nil, err
		}
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
			r.Messages[n-1].Content = append(r.Messages[n-1].Content, blocks...)
			continue
		}
		r.Messages = append(r.Messages, message{Role: role, Content: blocks})
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		r.Tools = append(r.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return json.Marshal(r)
}

func (p *Provider) convert(m llm.Message, at parts.Where) (string, []block, error) {
	switch m.Role {
	case llm.RoleAssistant:
		var out []block
		if m.Reasoning != "" && m.ReasoningSignature != "" {
			out = append(out, block{Type: "thinking", Thinking: m.Reasoning, Signature: m.ReasoningSignature})
		}
		if m.Content != "" {
			out = append(out, block{Type: "text", Text: m.Content})
		}
		for _, c := range m.ToolCalls {
			input := json.RawMessage(c.Arguments)
			if !json.Valid(input) {
				input = json.RawMessage(`{}`)
			}
			out = append(out, block{Type: "tool_use", ID: c.ID, Name: c.Name, Input: input})
		}
		return "assistant", out, nil
	case llm.RoleTool:
		r := block{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.IsError}
		if m.HasParts() {
			content, err := encodeParts(m.Parts, at, true)
			if err != nil {
				return "", nil, err
			}
			r.Content = content
		} else if m.Content != "" {
			r.Content = m.Content
		}
		return "user", []block{r}, nil
	}
	if m.HasParts() {
		content, err := encodeParts(m.Parts, at, false)
		return "user", content, err
	}
	return "user", []block{{Type: "text", Text: m.Content}}, nil
}

// ContextWindow returns context_window, else 200k tokens, the window of
// the Claude models.
func (p *Provider) ContextWindow(string) int { return p.cfg.Window(200000) }

// Capabilities: the Messages API takes images and PDFs with every current
// Claude model.
func (p *Provider) Capabilities(string) parts.Capabilities {
	return parts.Capabilities{Images: true, Documents: true}
}
