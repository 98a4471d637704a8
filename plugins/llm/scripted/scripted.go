// Package scripted is a model provider that answers from a script instead of
// a network: deterministic, instant and offline. Tests drive the agent loop
// with it, and the shipped config.yaml uses it so dsh runs out of the box.
//
// Each agent walks the script's replies in order and starts over after the
// last one. Without replies the provider echoes the latest user message.
package scripted

import (
	stdctx "context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

// Config is the plugin's configuration.
type Config struct {
	// Name is the provider name agents refer to; default "scripted".
	Name string `koanf:"name" json:"name,omitempty"`
	// Replies are answered in order, one per model call, per agent.
	Replies []Reply `koanf:"replies" json:"replies,omitempty"`
	// Delay is slept before each chunk, to watch streaming happen.
	Delay time.Duration `koanf:"delay" json:"delay,omitempty"`
	// ContextWindow is the window the provider reports, in tokens
	// (default 128000), for plugins that keep requests within it.
	ContextWindow int `koanf:"context_window" json:"context_window,omitempty"`
	// SimulateUsage reports, for replies without a usage, an estimated
	// usage computed from the request: input tokens, and as cache hits
	// the tokens of the prefix it shares with the agent's previous
	// request, the way a provider's prompt cache would serve it.
	SimulateUsage bool `koanf:"simulate_usage" json:"simulate_usage,omitempty"`
}

// DefaultContextWindow is the window reported when context_window is unset.
const DefaultContextWindow = 128000

// Reply is one scripted model answer.
type Reply struct {
	Reasoning string `koanf:"reasoning" json:"reasoning,omitempty"`
	Text      string `koanf:"text" json:"text,omitempty"`
	// ToolCalls are requested after the text.
	ToolCalls []Call `koanf:"tool_calls" json:"tool_calls,omitempty"`
	// Finish overrides the finish reason: stop, tool-calls, max-tokens or
	// error. By default it is tool-calls when there are calls, else stop.
	Finish string `koanf:"finish" json:"finish,omitempty"`
	// Error is the text of an error finish.
	Error string `koanf:"error" json:"error,omitempty"`
	// Usage is reported before the finish when set.
	Usage *llm.Usage `koanf:"usage" json:"usage,omitempty"`
}

// Call is a scripted tool call.
type Call struct {
	Name      string `koanf:"name" json:"name"`
	Arguments string `koanf:"arguments" json:"arguments,omitempty"`
}

// Provider is the scripted model.
type Provider struct {
	cfg Config
	// streams holds each reply already cut into chunks; streams share
	// them read-only.
	streams [][]llm.Chunk
	mu      sync.Mutex
	pos     map[string]int
	// last is each agent's previous request, for simulated cache hits.
	last map[string]llm.Request
}

// Validate checks the script.
func (cfg Config) Validate() error {
	if cfg.Delay < 0 {
		return errs.New(errs.InvalidArgument, "scripted: delay cannot be negative")
	}
	if cfg.ContextWindow < 0 {
		return errs.New(errs.InvalidArgument, "scripted: context_window cannot be negative; leave it out for the default")
	}
	for i, r := range cfg.Replies {
		switch llm.FinishReason(r.Finish) {
		case "", llm.FinishStop, llm.FinishToolCalls, llm.FinishMaxTokens, llm.FinishError:
		default:
			return errs.New(errs.InvalidArgument, fmt.Sprintf(
				"scripted: replies[%d].finish is %q; use stop, tool-calls, max-tokens or error", i, r.Finish))
		}
		for j, c := range r.ToolCalls {
			if c.Name == "" {
				return errs.New(errs.InvalidArgument, fmt.Sprintf("scripted: replies[%d].tool_calls[%d] has no name", i, j))
			}
		}
	}
	return nil
}

// New returns a provider for cfg after checking it.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, pos: map[string]int{}, last: map[string]llm.Request{}}
	for _, r := range cfg.Replies {
		p.streams = append(p.streams, chunks(r))
	}
	return p, nil
}

// Plugin registers the scripted provider with the llm service.
var Plugin = plugin.Register("llm.scripted", "an offline model that answers from a script (or echoes)", func(ctx *dshctx.Context, cfg Config) error {
	p, err := New(cfg)
	if err != nil {
		return err
	}
	svc, err := llm.Key.Get(ctx)
	if err != nil {
		return err
	}
	return svc.Register(ctx, cfg.providerName(), p)
}, llm.Key).ProvidesModel(Config.providerName)

// providerName is the name agents refer to the provider by.
func (cfg Config) providerName() string {
	if cfg.Name == "" {
		return "scripted"
	}
	return cfg.Name
}

// ContextWindow returns context_window, else DefaultContextWindow.
func (p *Provider) ContextWindow(string) int {
	if p.cfg.ContextWindow > 0 {
		return p.cfg.ContextWindow
	}
	return DefaultContextWindow
}

// Capabilities: the scripted model takes every part a real one does,
// so entry points let attachments through to it in tests and demos.
func (p *Provider) Capabilities(string) parts.Capabilities {
	return parts.Capabilities{Images: true, Documents: true}
}

// Stream answers with the agent's next reply. Like a real provider it
// refuses, before answering, a part of the step's new messages (those
// after the last assistant message) that came without its bytes.
func (p *Provider) Stream(ctx stdctx.Context, req llm.Request) (llm.Stream, error) {
	if err := p.resolved(req); err != nil {
		return nil, err
	}
	var cs []llm.Chunk
	if len(p.streams) == 0 {
		cs = chunks(Reply{Text: echo(req.History)})
	} else {
		p.mu.Lock()
		n := p.pos[req.AgentID]
		p.pos[req.AgentID] = n + 1
		p.mu.Unlock()
		cs = p.streams[n%len(p.streams)]
	}
	if p.cfg.SimulateUsage {
		cs = p.simulate(req, cs)
	}
	return &stream{ctx: ctx, chunks: cs, delay: p.cfg.Delay}, nil
}

// simulate returns cs with an estimated usage before the finish, unless
// the reply reports its own.
func (p *Provider) simulate(req llm.Request, cs []llm.Chunk) []llm.Chunk {
	p.mu.Lock()
	prev, seen := p.last[req.AgentID]
	p.last[req.AgentID] = req
	p.mu.Unlock()
	out := 0
	for _, c := range cs {
		switch c.Kind {
		case llm.ChunkUsage:
			return cs
		case llm.ChunkText, llm.ChunkReasoning:
			out += llm.EstimateText(c.Text)
		case llm.ChunkToolCall:
			out += llm.EstimateText(c.ToolCall.Name) + llm.EstimateText(c.ToolCall.Arguments)
		}
	}
	in := llm.EstimateRequest(req)
	hit := 0
	if seen {
		hit = sharedPrefix(prev, req)
	}
	u := llm.Usage{InputTokens: in, OutputTokens: out, CacheHitTokens: hit, CacheMissTokens: in - hit}
	res := append(slices.Clone(cs[:len(cs)-1]), llm.Chunk{Kind: llm.ChunkUsage, Usage: &u})
	return append(res, cs[len(cs)-1])
}

// sharedPrefix estimates the tokens of the prefix b shares with a: the
// system prompt and tools when both are equal, then the messages equal in
// both, in order.
func sharedPrefix(a, b llm.Request) int {
	if a.System != b.System || !slices.EqualFunc(a.Tools, b.Tools, func(x, y llm.ToolSpec) bool {
		return x.Name == y.Name && x.Description == y.Description && string(x.Parameters) == string(y.Parameters)
	}) {
		return 0
	}
	n := llm.EstimateRequest(llm.Request{System: b.System, Tools: b.Tools})
	for i := range min(a.History.Len(), b.History.Len()) {
		x, y := a.History.At(i), b.History.At(i)
		if x.Role != y.Role || x.Content != y.Content || x.Reasoning != y.Reasoning ||
			x.ToolCallID != y.ToolCallID || !slices.Equal(x.ToolCalls, y.ToolCalls) {
			break
		}
		n += llm.EstimateMessage(y)
	}
	return n
}

// resolved checks the parts of the messages after the last assistant
// message, the ones new to this step: earlier ones were checked by the
// steps that took them, and walking the whole history on every call would
// cost a long conversation for nothing.
func (p *Provider) resolved(req llm.Request) error {
	h := req.History
	for i := h.Len() - 1; i >= 0; i-- {
		m := h.At(i)
		if m.Role == llm.RoleAssistant {
			return nil
		}
		for j, part := range m.Parts {
			at := parts.Where{Provider: p.cfg.providerName(), Model: req.Model, Message: i, Part: j}
			var err error
			switch {
			case part.Type == llm.PartText:
			case part.Type == llm.PartImage || parts.IsPDF(part):
				_, err = at.Bytes(part)
			default:
				_, err = at.Text(part, p.Capabilities(req.Model))
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// echo answers the latest user message with its text and, for each part
// beyond text, what it received: type, media type and size, so a test sees
// that an attachment reached the model with its bytes.
func echo(h llm.History) string {
	for i := h.Len() - 1; i >= 0; i-- {
		if m := h.At(i); m.Role == llm.RoleUser {
			out := "You said: " + m.Content
			for _, part := range m.Parts {
				if part.Type == llm.PartText {
					continue
				}
				n := len(part.Data)
				if n == 0 {
					n = len(part.Text)
				}
				out += fmt.Sprintf(" [%s %s, %d bytes]", part.Type, part.MediaType, n)
			}
			return out
		}
	}
	return "Hello."
}

// chunks splits a reply the way a real stream arrives: text word by word,
// tool calls as a head fragment and an argument fragment.
func chunks(r Reply) []llm.Chunk {
	var out []llm.Chunk
	for _, w := range words(r.Reasoning) {
		out = append(out, llm.Chunk{Kind: llm.ChunkReasoning, Text: w})
	}
	for _, w := range words(r.Text) {
		out = append(out, llm.Chunk{Kind: llm.ChunkText, Text: w})
	}
	for i, c := range r.ToolCalls {
		id := fmt.Sprintf("call_%d", i+1)
		out = append(out,
			llm.Chunk{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: i, ID: id, Name: c.Name}},
			llm.Chunk{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: i, Arguments: orEmptyObject(c.Arguments)}})
	}
	if r.Usage != nil {
		u := *r.Usage
		out = append(out, llm.Chunk{Kind: llm.ChunkUsage, Usage: &u})
	}
	finish := llm.FinishReason(r.Finish)
	if finish == "" {
		finish = llm.FinishStop
		if len(r.ToolCalls) > 0 {
			finish = llm.FinishToolCalls
		}
	}
	fin := llm.Chunk{Kind: llm.ChunkFinish, Finish: finish}
	if finish == llm.FinishError {
		fin.Error = r.Error
		if fin.Error == "" {
			fin.Error = "scripted error"
		}
	}
	return append(out, fin)
}

func orEmptyObject(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}

// words splits s after each space, keeping the spaces.
func words(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

type stream struct {
	ctx    stdctx.Context
	chunks []llm.Chunk
	delay  time.Duration
}

func (s *stream) Recv() (llm.Chunk, error) {
	if err := s.ctx.Err(); err != nil {
		return llm.Chunk{}, err
	}
	if len(s.chunks) == 0 {
		return llm.Chunk{}, io.EOF
	}
	if s.delay > 0 {
		t := time.NewTimer(s.delay)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return llm.Chunk{}, s.ctx.Err()
		}
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}

func (s *stream) Close() error { s.chunks = nil; return nil }
