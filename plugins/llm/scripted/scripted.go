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
	"strings"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/llm"
)

func init() {
	host.Register(host.Info{
		ID: "llm.scripted", Doc: "an offline model that answers from a script (or echoes)",
		Plugin: Plugin, Config: func() any { return &Config{} },
		Provider: func(c any) string {
			if c, ok := c.(*Config); ok && c.Name != "" {
				return c.Name
			}
			return "scripted"
		},
	})
}

// Config is the plugin's configuration.
type Config struct {
	// Name is the provider name agents refer to; default "scripted".
	Name string `koanf:"name" json:"name,omitempty"`
	// Replies are answered in order, one per model call, per agent.
	Replies []Reply `koanf:"replies" json:"replies,omitempty"`
	// Delay is slept before each chunk, to watch streaming happen.
	Delay time.Duration `koanf:"delay" json:"delay,omitempty"`
}

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
}

// Validate checks the script.
func (cfg Config) Validate() error {
	if cfg.Delay < 0 {
		return errs.New(errs.InvalidArgument, "scripted: delay cannot be negative")
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
	p := &Provider{cfg: cfg, pos: map[string]int{}}
	for _, r := range cfg.Replies {
		p.streams = append(p.streams, chunks(r))
	}
	return p, nil
}

// Plugin registers the scripted provider with the llm service. Its config is
// a Config or *Config.
var Plugin = dshctx.Define("llm.scripted", func(ctx *dshctx.Context, config any) error {
	cfg, err := dshctx.ConfigAs[Config]("llm.scripted", config)
	if err != nil {
		return err
	}
	p, err := New(cfg)
	if err != nil {
		return err
	}
	svc, err := llm.Key.Get(ctx)
	if err != nil {
		return err
	}
	name := cfg.Name
	if name == "" {
		name = "scripted"
	}
	return svc.Register(ctx, name, p)
}, llm.Key)

// Stream answers with the agent's next reply.
func (p *Provider) Stream(ctx stdctx.Context, req llm.Request) (llm.Stream, error) {
	if len(p.streams) == 0 {
		return &stream{ctx: ctx, chunks: chunks(Reply{Text: echo(req.History)}), delay: p.cfg.Delay}, nil
	}
	p.mu.Lock()
	n := p.pos[req.AgentID]
	p.pos[req.AgentID] = n + 1
	p.mu.Unlock()
	return &stream{ctx: ctx, chunks: p.streams[n%len(p.streams)], delay: p.cfg.Delay}, nil
}

func echo(h llm.History) string {
	for i := h.Len() - 1; i >= 0; i-- {
		if m := h.At(i); m.Role == llm.RoleUser {
			return "You said: " + m.Content
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
