// Package replay re-runs recorded sessions against a config, to see which
// decisions a config change would change before it ships (dsh replay).
//
// A replay runs each recorded session again in a host started from the
// new config, through the session service like any entry point: the
// recorded messages are sent again from their recorded senders, so
// admission decides anew; the model is a provider that answers each step
// with the assistant message the recording holds for it; tools/execute is
// cut off before any tool, sandbox or hook runs it and answers each call
// with its recorded result, so nothing outside dsh happens; and the
// approval stage — policies, hooks, plugins — judges every call anew,
// with an Ask answered as the recording says it was. The decision records
// of the new run are then compared with the recorded ones, key by key
// (the message's request id; the turn, step and call id of a call), and
// every verdict that differs is reported, with every turn that would now
// be refused or end otherwise.
//
// What the recorded model said does not change with the config: a call
// denied now still gets the model's next recorded answer, which is the
// point — the replay shows decisions, not a new conversation.
package replay

import (
	stdctx "context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
)

// Provider is the name the replay's model provider registers under.
const Provider = "dsh-replay"

// Codes of the replay.
const (
	// Failed: a recorded session could not be replayed (its agent is not
	// in the new config, the host failed).
	Failed errs.Code = "REPLAY_FAILED"
)

// NoRecordedOutput is what the replay's model answers where the
// recording holds no answer: a message admitted now that was refused
// then, a turn that runs more steps than it did.
const NoRecordedOutput = "[replay: the recording holds no model output for this step]"

// NoRecordedResult answers a call the recording holds no result for.
const NoRecordedResult = "[replay: the recording holds no result for this call; it did not run]"

// Replayer replays recordings in one host, one session at a time.
type Replayer struct {
	h *host.Host
	// mu serializes replays: the provider and the tool stand-in answer
	// for the session being replayed.
	mu  sync.Mutex
	cur atomic.Pointer[run]
	// steps counts the model steps answered from recordings.
	steps atomic.Int64
}

// run is the state of the session being replayed.
type run struct {
	s script
	// mu guards turn and the queues consumed from s.
	mu   sync.Mutex
	turn string
}

func (r *run) setTurn(t string) {
	r.mu.Lock()
	r.turn = t
	r.mu.Unlock()
}

// New mounts the replay's stand-ins for the model and the tools on h's
// root: h must be started from the config to judge, as Config returns it.
func New(h *host.Host) (*Replayer, error) {
	r := &Replayer{h: h}
	p := dshctx.Define("replay", func(ctx *dshctx.Context, _ dshctx.None) error {
		svc, err := llm.Key.Get(ctx)
		if err != nil {
			return err
		}
		if err := svc.Register(ctx, Provider, r); err != nil {
			return err
		}
		// First of all tools/execute listeners, in every scope: no
		// sandbox, hook or tool after it runs.
		_, err = tools.EventExecute.On(ctx, r.execute, waterfall.Prepend)
		return err
	}, llm.Key)
	f, err := h.Root().Plugin(p, nil)
	if err != nil {
		return nil, err
	}
	if err := f.Await(stdctx.Background()); err != nil {
		return nil, err
	}
	return r, nil
}

// Steps is how many model steps the replayer answered from recordings.
func (r *Replayer) Steps() int64 { return r.steps.Load() }

// execute answers a call with its recorded result.
func (r *Replayer) execute(_ stdctx.Context, x tools.Execution, _ tools.ExecuteNext) (tools.Result, error) {
	cur := r.cur.Load()
	if cur == nil {
		return tools.Result{Content: NoRecordedResult, IsError: true}, nil
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	q := cur.s.results[cur.turn][x.Call.ID]
	if len(q) == 0 {
		return tools.Result{Content: NoRecordedResult, IsError: true}, nil
	}
	m := q[0]
	cur.s.results[cur.turn][x.Call.ID] = q[1:]
	return tools.Result{Content: m.Content, IsError: m.IsError}, nil
}

// answer answers an Ask as the recording did.
func (r *Replayer) answer(req approval.Request) approval.Answer {
	cur := r.cur.Load()
	if cur == nil {
		return approval.Answer{Choice: approval.Deny, Reason: "replay: nobody to ask", Unattended: true}
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	q := cur.s.answers[cur.turn][req.CallID]
	if len(q) == 0 {
		return approval.Answer{Choice: approval.Deny, Reason: "replay: nobody was asked about this call in the recording", Unattended: true}
	}
	cur.s.answers[cur.turn][req.CallID] = q[1:]
	return answerOf(q[0])
}

// Stream answers a model request with the recorded assistant message of
// the step: the turn is the one the history's latest recorded prompt
// started, the step the count of assistant messages after it.
func (r *Replayer) Stream(_ stdctx.Context, req llm.Request) (llm.Stream, error) {
	cur := r.cur.Load()
	var rep *reply
	if cur != nil {
		rep = cur.lookup(req.History)
	}
	if rep == nil {
		return &stream{chunks: []llm.Chunk{{Kind: llm.ChunkText, Text: NoRecordedOutput}, {Kind: llm.ChunkFinish, Finish: llm.FinishStop}}}, nil
	}
	r.steps.Add(1)
	return &stream{chunks: chunksOf(*rep)}, nil
}

func (r *run) lookup(h llm.History) *reply {
	assistants := 0
	for i := h.Len() - 1; i >= 0; i-- {
		m := h.At(i)
		switch {
		case m.Role == llm.RoleAssistant:
			assistants++
		case m.Role == llm.RoleUser && m.RequestID != "":
			replies, ok := r.s.replies[m.RequestID]
			if !ok {
				continue // a steering message: its turn started earlier
			}
			if assistants < len(replies) {
				return &replies[assistants]
			}
			return nil
		}
	}
	return nil
}

// chunksOf streams a recorded assistant message as its provider would
// have: reasoning, text, the calls with their recorded ids, the usage and
// the finish.
func chunksOf(rep reply) []llm.Chunk {
	var out []llm.Chunk
	m := rep.msg
	if m.Reasoning != "" {
		out = append(out, llm.Chunk{Kind: llm.ChunkReasoning, Text: m.Reasoning, Signature: m.ReasoningSignature})
	}
	if m.Content != "" {
		out = append(out, llm.Chunk{Kind: llm.ChunkText, Text: m.Content})
	}
	for i, c := range m.ToolCalls {
		args := c.Arguments
		if args == "" {
			args = "{}"
		}
		out = append(out, llm.Chunk{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, Arguments: args}})
	}
	if rep.usage != nil {
		u := *rep.usage
		out = append(out, llm.Chunk{Kind: llm.ChunkUsage, Usage: &u})
	}
	finish := rep.finish
	switch {
	case finish == "" && len(m.ToolCalls) > 0:
		finish = llm.FinishToolCalls
	case finish == "", finish == "cut":
		finish = llm.FinishStop
	}
	return append(out, llm.Chunk{Kind: llm.ChunkFinish, Finish: finish})
}

type stream struct {
	chunks []llm.Chunk
	i      int
}

func (s *stream) Recv() (llm.Chunk, error) {
	if s.i >= len(s.chunks) {
		return llm.Chunk{}, io.EOF
	}
	c := s.chunks[s.i]
	s.i++
	return c, nil
}

func (s *stream) Close() error { return nil }

// Replay runs rec again and compares its decisions with the recorded
// ones.
func (r *Replayer) Replay(ctx stdctx.Context, rec Recording) (Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := &run{s: read(rec)}
	r.cur.Store(cur)
	defer r.cur.Store(nil)
	rep := Report{Session: rec.Session, Agent: rec.Agent, Steps: cur.s.steps}
	svc := r.h.Sessions()
	sid := "replay-" + rec.Session
	if !session.ValidID(sid) {
		// An id near the length limit: the prefix must not push it over.
		sid = "replay-" + strings.TrimPrefix(session.InputsDigest(rec.Session), "sha256:")[:32]
	}
	if _, err := svc.Ensure(ctx, sessions.EnsureOptions{Mode: sessions.EnsureCreate, OpenOptions: sessions.OpenOptions{
		Agent: rec.Agent, SessionID: sid, Provider: Provider, Model: cur.s.model, KeepRunning: true,
	}}); err != nil {
		return rep, errs.Wrap(Failed, err, fmt.Sprintf("session %q cannot be replayed: its agent %q does not open under the new config", rec.Session, rec.Agent))
	}
	defer func() { _ = svc.Close(stdctx.WithoutCancel(ctx), sid) }()
	if len(cur.s.answers) > 0 {
		// The recording answered Asks: answer them again as it did. A
		// recording without answers needs no answerer — an Ask now gets
		// none, is refused, and its verdict ask is the change reported.
		stop, err := r.answerFor(ctx, sid, rec.Session)
		if err != nil {
			return rep, err
		}
		defer stop()
	}
	refusals := map[string]string{}
	var turns []sessions.Turn
	flushTurns := func() error {
		for _, t := range turns {
			if _, err := t.Wait(ctx); err != nil && ctx.Err() != nil {
				return err
			}
		}
		turns = turns[:0]
		return nil
	}
	for i, p := range cur.s.prompts {
		if !p.steer && p.turn != "" && (i == 0 || cur.s.prompts[i-1].turn != p.turn) {
			// A new recorded turn: the one before has ended.
			if err := flushTurns(); err != nil {
				return rep, err
			}
			cur.setTurn(p.turn)
		}
		req := sessions.PromptRequest{RequestID: p.requestID, Content: p.content, Source: p.source}
		var t sessions.Turn
		var err error
		if p.steer {
			t, err = svc.Steer(ctx, sid, req)
		} else {
			t, err = svc.Prompt(ctx, sid, req)
		}
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			refusals[p.requestID] = err.Error()
			continue
		}
		turns = append(turns, t)
	}
	if err := flushTurns(); err != nil {
		return rep, err
	}
	if err := svc.Idle(ctx, sid); err != nil {
		return rep, err
	}
	events, err := svc.History(ctx, sid, 0)
	if err != nil {
		return rep, err
	}
	compare(&rep, cur.s, events, refusals)
	return rep, nil
}

// answerFor attaches to the replayed session as its answerer, answering
// each Ask as the recording did, until the returned stop is called.
func (r *Replayer) answerFor(ctx stdctx.Context, sid, recorded string) (stop func(), err error) {
	st, err := r.h.Sessions().Attach(ctx, sid, sessions.AttachOptions{Approvals: true, Name: "replay", FromEnd: true})
	if err != nil {
		return nil, errs.Wrap(Failed, err, fmt.Sprintf("replaying session %q: attaching failed", recorded))
	}
	answering, cancel := stdctx.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			u, err := st.Next(answering)
			if err != nil {
				return
			}
			if u.Question != nil {
				_ = st.Answer(u.Question.ID, r.answer(u.Question.Request))
			}
		}
	}()
	return func() { cancel(); _ = st.Close(); <-done }, nil
}

// oneLine shortens s to a line for a report.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// Config is cfg as a replay runs it: without the root entries of model
// providers (the recording stands in for the model, and a provider may
// need a key the replay has no use for) or session stores (the replayed
// sessions live in memory and never touch the recorded ones), and with
// each plugin config in its replay form (config.Replayable: a budget
// counts in memory, not in the shared bucket).
func Config(cfg *config.Config) *config.Config {
	return cfg.ForReplay().OnlyPlugins(func(e *config.Entry) bool {
		if config.IsSessionStore(e) {
			return false
		}
		if info, ok := plugin.Lookup(e.Use); ok && info.Provider != nil {
			return false
		}
		return true
	})
}
