package acp_test

import (
	"bufio"
	stdctx "context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/llm"
)

// stampAt is when the stamping provider handed out its first chunk.
var stampAt atomic.Int64

type stampStream struct {
	n    int
	sent int
}

func (s *stampStream) Recv() (llm.Chunk, error) {
	switch {
	case s.sent == 0:
		s.sent++
		stampAt.Store(time.Now().UnixNano())
		return llm.Chunk{Kind: llm.ChunkText, Text: "first "}, nil
	case s.sent < s.n:
		s.sent++
		return llm.Chunk{Kind: llm.ChunkText, Text: "word "}, nil
	case s.sent == s.n:
		s.sent++
		return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishStop}, nil
	}
	return llm.Chunk{}, io.EOF
}
func (s *stampStream) Close() error { return nil }

type stampProvider struct{ n int }

func (p stampProvider) Stream(stdctx.Context, llm.Request) (llm.Stream, error) {
	return &stampStream{n: p.n}, nil
}

type stampConfig struct {
	Chunks int `koanf:"chunks"`
}

func init() {
	plugin.Register("test.stamp", "a model that stamps its first chunk (tests only)", func(ctx *dshctx.Context, cfg stampConfig) error {
		svc, err := llm.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, "stamp", stampProvider{n: cfg.Chunks})
	}, llm.Key).ProvidesModel(func(stampConfig) string { return "stamp" })
}

// firstChunkClient notes when the first agent_message_chunk of a prompt
// arrives and counts the chunks.
type firstChunkClient struct {
	*client
	first  atomic.Int64
	chunks atomic.Int64
	bytes  atomic.Int64
}

func (c *firstChunkClient) SessionUpdate(_ stdctx.Context, n acp.SessionNotification) error {
	if n.Update.AgentMessageChunk != nil {
		if c.chunks.Add(1) == 1 {
			c.first.Store(time.Now().UnixNano())
		}
		if t := n.Update.AgentMessageChunk.Content.Text; t != nil {
			c.bytes.Add(int64(len(t.Text)))
		}
	}
	return nil
}

func benchEnv(b *testing.B, chunks int) (*firstChunkClient, *acp.ClientSideConnection, acp.SessionId, func()) {
	store := b.TempDir()
	yaml := "plugins:\n  - use: test.stamp\n    config: {chunks: " + strconv.Itoa(chunks) + "}\n  - use: session.jsonl\n    config: {dir: " + store + "}\nagents:\n  - id: main\n    provider: stamp\n"
	h, stop := startHost(b, yaml)
	c := &firstChunkClient{client: newClient()}
	conn, done := serveOn(b, h, c)
	ctx := stdctx.Background()
	conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: 1})
	s, err := conn.NewSession(ctx, newSessionReq(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	return c, conn, s.SessionId, func() { done(); stop() }
}

// BenchmarkFirstChunk: from the provider's first chunk to the client's
// first agent_message_chunk, through the agent loop, the live hub, the
// SDK and a pipe. Two floors are measured in the same run: one
// session/update line through an io.Pipe and a decode (the pipe floor),
// and the SDK's own SessionUpdate from an agent-side connection to the
// handler of a client-side one over an io.Pipe (the SDK floor: the SDK's
// encoding, the pipe and the client's reader goroutines, none of it dsh's).
func BenchmarkFirstChunk(b *testing.B) {
	c, conn, id, done := benchEnv(b, 1)
	defer done()
	floor := pipeFloor(200)
	sdk := sdkFloor(b, 200)
	var total time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		c.chunks.Store(0)
		if _, err := conn.Prompt(stdctx.Background(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("go")}}); err != nil {
			b.Fatal(err)
		}
		total += time.Duration(c.first.Load() - stampAt.Load())
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	avg := total / time.Duration(b.N)
	b.ReportMetric(float64(avg.Microseconds()), "µs-first-chunk")
	b.ReportMetric(float64(avg)/float64(floor), "x-pipe-floor")
	b.ReportMetric(float64(floor)/float64(time.Microsecond), "µs-pipe-floor")
	b.ReportMetric(float64(sdk)/float64(time.Microsecond), "µs-sdk-floor")
}

// BenchmarkStreamUpdates: agent_message_chunk updates per second for a
// 2,000-chunk answer.
func BenchmarkStreamUpdates(b *testing.B) {
	const n = 2000
	c, conn, id, done := benchEnv(b, n)
	defer done()
	var updates int64
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		c.chunks.Store(0)
		c.bytes.Store(0)
		if _, err := conn.Prompt(stdctx.Background(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("go")}}); err != nil {
			b.Fatal(err)
		}
		// A client that falls behind the hub's buffer re-attaches and gets
		// the rest as one update: the text is whole either way.
		if got := c.bytes.Load(); got != int64(len("first ")+5*(n-1)) {
			b.Fatalf("%d bytes of text in %d updates", got, c.chunks.Load())
		}
		updates += c.chunks.Load()
	}
	el := time.Since(start)
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(n*b.N)/el.Seconds(), "chunks/s")
	b.ReportMetric(float64(updates)/el.Seconds(), "updates/s")
	b.ReportMetric(float64(updates)/float64(b.N), "updates/answer")
}

// pipeFloor is the average time of one session/update line written to an
// io.Pipe and decoded on the other side.
func pipeFloor(n int) time.Duration {
	line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": acp.SessionNotification{
		SessionId: "main-session-00000000-0000-0000-0000-000000000000", Update: acp.UpdateAgentMessageText("first ")}})
	line = append(line, '\n')
	r, w := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	got := make(chan struct{})
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var m map[string]any
			json.Unmarshal(sc.Bytes(), &m)
			got <- struct{}{}
		}
	}()
	start := time.Now()
	for i := 0; i < n; i++ {
		w.Write(line)
		<-got
	}
	el := time.Since(start)
	w.Close()
	wg.Wait()
	return el / time.Duration(n)
}

// floorClient signals each agent_message_chunk it is handed.
type floorClient struct {
	*client
	got chan struct{}
}

func (c *floorClient) SessionUpdate(_ stdctx.Context, n acp.SessionNotification) error {
	if n.Update.AgentMessageChunk != nil {
		c.got <- struct{}{}
	}
	return nil
}

// sdkFloor is the average time from the SDK's SessionUpdate on an
// agent-side connection to the handler of a client-side connection that
// reads it from an io.Pipe.
func sdkFloor(tb testing.TB, n int) time.Duration {
	toClient, agentOut := io.Pipe()
	toAgent, clientOut := io.Pipe()
	agent := acp.NewAgentSideConnection(nil, agentOut, toAgent)
	agent.SetLogger(slog.New(slog.DiscardHandler))
	c := &floorClient{client: newClient(), got: make(chan struct{})}
	conn := acp.NewClientSideConnection(c, clientOut, toClient)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	note := acp.SessionNotification{SessionId: "main-session-00000000-0000-0000-0000-000000000000", Update: acp.UpdateAgentMessageText("first ")}
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := agent.SessionUpdate(stdctx.Background(), note); err != nil {
			tb.Fatal(err)
		}
		<-c.got
	}
	el := time.Since(start)
	agentOut.Close()
	clientOut.Close()
	<-conn.Done()
	<-agent.Done()
	return el / time.Duration(n)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var _ = scripted.Reply{}
