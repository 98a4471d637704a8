package anthropic

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

// Stream starts one message.
func (p *Provider) Stream(ctx stdctx.Context, req llm.Request) (llm.Stream, error) {
	body, err := p.body(req)
	if err != nil {
		return nil, err
	}
	return p.client.Stream(ctx, p.url, p.header, body, func(b io.ReadCloser) llm.Stream {
		return &stream{provider: p.name, body: b, events: sse.NewReader(b), tools: map[int]int{}}
	})
}

type wireUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

type wireEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		Usage wireUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage `json:"usage"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type stream struct {
	provider string
	body     io.ReadCloser
	events   *sse.Reader
	queue    sse.Queue
	// tools maps a content block index to its tool call index.
	tools  map[int]int
	usage  llm.Usage
	finish llm.Chunk
	wire   wireEvent
	json   sse.JSONDecoder
}

func (s *stream) Recv() (llm.Chunk, error) { return s.queue.Next(s.read) }

func (s *stream) Close() error { return s.body.Close() }

func (s *stream) fail(reason, msg string) error {
	return errs.New(llm.ProviderFailed, fmt.Sprintf("%s: %s", s.provider, msg)).WithReason(reason)
}

func (s *stream) read() error {
	ev, err := s.events.Next()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return s.fail(ReasonTruncated, "the stream ended before message_stop; the answer may be incomplete")
	}
	if errs.CodeOf(err) != "" {
		return err // a stall, already saying what and where
	}
	if err != nil {
		return errs.Wrap(llm.ProviderFailed, err, s.provider+": reading the stream failed").WithReason(ReasonTruncated)
	}
	s.wire = wireEvent{}
	if err := s.json.Decode(ev.Data, &s.wire); err != nil {
		return s.fail(ReasonBadChunk, fmt.Sprintf("malformed event at line %d of the stream: %v: %s", ev.Line, err, clip(ev.Data)))
	}
	w := &s.wire
	switch w.Type {
	case "message_start":
		s.usage = usageOf(w.Message.Usage)
	case "content_block_start":
		if w.ContentBlock.Type == "tool_use" {
			i := len(s.tools)
			s.tools[w.Index] = i
			s.queue.Push(llm.Chunk{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: i, ID: w.ContentBlock.ID, Name: w.ContentBlock.Name}})
		}
	case "content_block_delta":
		switch w.Delta.Type {
		case "text_delta":
			if w.Delta.Text != "" {
				s.queue.Push(llm.Chunk{Kind: llm.ChunkText, Text: w.Delta.Text})
			}
		case "thinking_delta":
			s.queue.Push(llm.Chunk{Kind: llm.ChunkReasoning, Text: w.Delta.Thinking})
		case "signature_delta":
			s.queue.Push(llm.Chunk{Kind: llm.ChunkReasoning, Signature: w.Delta.Signature})
		case "input_json_delta":
			i, ok := s.tools[w.Index]
			if !ok {
				return s.fail(ReasonBadChunk, fmt.Sprintf("tool input for content block %d, which is not a tool_use block (line %d)", w.Index, ev.Line))
			}
			if w.Delta.PartialJSON != "" {
				s.queue.Push(llm.Chunk{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: i, Arguments: w.Delta.PartialJSON}})
			}
		}
	case "message_delta":
		if u := w.Usage; u != nil {
			// Its counts are cumulative. Newer API versions repeat the
			// input counts here, final after server-side tool use.
			if u.InputTokens != 0 || u.CacheReadInputTokens != 0 || u.CacheCreationInputTokens != 0 {
				s.usage = usageOf(*u)
			}
			s.usage.OutputTokens = u.OutputTokens
		}
		if w.Delta.StopReason != "" {
			s.finish = finishOf(w.Delta.StopReason)
		}
	case "message_stop":
		s.queue.Done = true
		u := s.usage
		s.queue.Push(llm.Chunk{Kind: llm.ChunkUsage, Usage: &u})
		if s.finish.Kind == 0 {
			s.finish = llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishStop}
		}
		s.queue.Push(s.finish)
	case "error":
		return s.fail(ReasonAPIError, fmt.Sprintf("the API reported %s mid-stream: %s", w.Error.Type, w.Error.Message))
	}
	// ping, content_block_stop and event types added later need nothing.
	return nil
}

func usageOf(u wireUsage) llm.Usage {
	return llm.Usage{
		InputTokens:     u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		OutputTokens:    u.OutputTokens,
		CacheHitTokens:  u.CacheReadInputTokens,
		CacheMissTokens: u.InputTokens + u.CacheCreationInputTokens,
	}
}

// finishOf maps a stop_reason; unknown ones become an error finish that
// keeps the raw value.
func finishOf(raw string) llm.Chunk {
	switch raw {
	case "end_turn", "stop_sequence":
		return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishStop}
	case "max_tokens", "model_context_window_exceeded":
		return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishMaxTokens}
	case "tool_use":
		return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishToolCalls}
	case "refusal":
		return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishError, Error: string(llm.Refused) + ": the model refused to answer (stop_reason refusal)"}
	}
	return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishError, Error: fmt.Sprintf("unknown stop_reason %q", raw)}
}

func clip(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}
