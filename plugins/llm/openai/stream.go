package openai

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/internal/sse"
	"github.com/dsh-go/dsh/services/llm"
)

// Reasons of stream failures (code llm.ProviderFailed), shared by the
// providers.
const (
	ReasonTruncated = httpx.ReasonTruncated
	ReasonBadChunk  = httpx.ReasonBadChunk
	ReasonAPIError  = httpx.ReasonAPIError
	// ReasonStalled: nothing arrived within idle_timeout.
	ReasonStalled = httpx.ReasonStalled
)

// Stream starts one chat completion.
func (p *Provider) Stream(ctx stdctx.Context, req llm.Request) (llm.Stream, error) {
	body, err := p.body(req)
	if err != nil {
		return nil, err
	}
	return p.client.Stream(ctx, p.url, p.header, body, func(b io.ReadCloser) llm.Stream {
		return &stream{provider: p.name, body: b, events: sse.NewReader(b)}
	})
}

// The wire types hold plain strings where the API may send null: null
// leaves the zero value, and no pointer is allocated per chunk.
type wireDelta struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	// Reasoning is what some servers (vLLM, Ollama) call reasoning_content.
	Reasoning string `json:"reasoning"`
	ToolCalls []struct {
		Index    int              `json:"index"`
		ID       string           `json:"id"`
		Function wireFunctionCall `json:"function"`
	} `json:"tool_calls"`
}

type wireChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"`
	FinishReason string    `json:"finish_reason"`
}

type wireUsage struct {
	PromptTokens          int `json:"prompt_tokens"`
	CompletionTokens      int `json:"completion_tokens"`
	PromptCacheHitTokens  int `json:"prompt_cache_hit_tokens"`
	PromptCacheMissTokens int `json:"prompt_cache_miss_tokens"`
	PromptTokensDetails   *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

type wireChunk struct {
	// One choice is asked for; an array keeps it off the heap.
	Choices [1]wireChoice `json:"choices"`
	Usage   *wireUsage    `json:"usage"`
	Error   *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// stream turns SSE events into chunks. The finish is held back until
// [DONE], because the usage chunk comes after it and the agent loop stops
// reading at the finish.
type stream struct {
	provider string
	body     io.ReadCloser
	events   *sse.Reader
	queue    sse.Queue
	usage    *llm.Usage
	finish   *llm.Chunk
	wire     wireChunk
	json     sse.JSONDecoder
}

func (s *stream) Recv() (llm.Chunk, error) { return s.queue.Next(s.read) }

func (s *stream) Close() error { return s.body.Close() }

func (s *stream) fail(reason, msg string, cause error) error {
	return errs.Wrap(llm.ProviderFailed, cause, fmt.Sprintf("%s: %s", s.provider, msg)).WithReason(reason)
}

// read decodes one event into pending chunks.
func (s *stream) read() error {
	ev, err := s.events.Next()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return s.fail(ReasonTruncated, "the stream ended before [DONE]; the answer may be incomplete", nil)
	}
	if errs.CodeOf(err) != "" {
		return err // a stall, already saying what and where
	}
	if err != nil {
		return s.fail(ReasonTruncated, "reading the stream failed", err)
	}
	if string(ev.Data) == "[DONE]" {
		s.queue.Done = true
		if s.usage != nil {
			s.queue.Push(llm.Chunk{Kind: llm.ChunkUsage, Usage: s.usage})
		}
		fin := llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishStop}
		if s.finish != nil {
			fin = *s.finish
		}
		s.queue.Push(fin)
		return nil
	}
	s.wire = wireChunk{}
	if err := s.json.Decode(ev.Data, &s.wire); err != nil {
		return s.fail(ReasonBadChunk, fmt.Sprintf("malformed chunk at line %d of the stream: %v: %s", ev.Line, err, clip(ev.Data)), nil)
	}
	if e := s.wire.Error; e != nil {
		return s.fail(ReasonAPIError, "the API reported an error mid-stream: "+e.Message, nil)
	}
	if ch := &s.wire.Choices[0]; ch.Index == 0 {
		d := &ch.Delta
		if r := firstNonEmpty(d.ReasoningContent, d.Reasoning); r != "" {
			s.queue.Push(llm.Chunk{Kind: llm.ChunkReasoning, Text: r})
		}
		if d.Content != "" {
			s.queue.Push(llm.Chunk{Kind: llm.ChunkText, Text: d.Content})
		}
		for _, tc := range d.ToolCalls {
			s.queue.Push(llm.Chunk{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{
				Index: tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments,
			}})
		}
		if ch.FinishReason != "" {
			f := finishOf(ch.FinishReason)
			s.finish = &f
		}
	}
	if u := s.wire.Usage; u != nil {
		s.usage = usageOf(u)
	}
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// finishOf maps a finish_reason. Unknown values become an error finish that
// keeps the raw value.
func finishOf(raw string) llm.Chunk {
	switch raw {
	case "stop":
		return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishStop}
	case "length":
		return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishMaxTokens}
	case "tool_calls", "function_call":
		return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishToolCalls}
	case "content_filter":
		return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishError, Error: string(llm.Refused) + ": the provider's content filter stopped the answer (finish_reason content_filter)"}
	}
	return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishError, Error: fmt.Sprintf("unknown finish_reason %q", raw)}
}

func usageOf(u *wireUsage) *llm.Usage {
	out := &llm.Usage{
		InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CacheHitTokens: u.PromptCacheHitTokens, CacheMissTokens: u.PromptCacheMissTokens,
	}
	if d := u.PromptTokensDetails; d != nil && out.CacheHitTokens == 0 {
		out.CacheHitTokens = d.CachedTokens
		out.CacheMissTokens = max(0, u.PromptTokens-d.CachedTokens)
	}
	if out.CacheHitTokens+out.CacheMissTokens < out.InputTokens {
		// No cache split reported (vLLM, Ollama): what is not known to
		// be a hit is a miss.
		out.CacheMissTokens = out.InputTokens - out.CacheHitTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

func clip(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}
