// Package compact is the session.compact plugin: it keeps an agent's model
// requests within the model's context window.
//
// It listens on agent/request. When the prompt of the coming request passes
// threshold × the window — measured from the usage the provider reported
// for the last step plus an estimate of what was added since, or estimated
// whole before the first step — it asks the model, in a separate streamed
// request that an abort cancels, to summarize the older part of the history.
// The summary is recorded in the session log as a history/compacted event,
// from which the session derives the new history: the summary message, then
// the latest messages verbatim. So a resume sees the compacted history, and
// between two compactions the history only grows at its end: the request
// prefix stays the same and providers' prompt caches keep hitting.
//
// The cut between summarized and kept messages never falls between a tool
// call and its results. Before summarizing, tool results longer than
// prune_tool_results bytes are cut short in the summary request.
//
// Mount it before plugins that rewrite a request's history on agent/request:
// those registered after it see the compacted history; messages an earlier
// one appended are carried over, but the summary covers the session's
// history only.
//
// Compaction can also be asked for (Service.Request, the CLI's /compact):
// the agent's next model request then compacts whatever the threshold says.
package compact

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/google/uuid"
)

// Codes of the plugin.
const (
	// Failed: the summary request failed or returned no text. The request
	// goes on uncompacted; the error is reported on agent/error.
	Failed errs.Code = "COMPACT_FAILED"
	// Nothing: a compaction asked for found nothing older than the latest
	// exchange to summarize; it is the Err of its compact/done.
	Nothing errs.Code = "COMPACT_NOTHING"
)

// Defaults of the config.
const (
	DefaultThreshold        = 0.8
	DefaultKeep             = 0.2
	DefaultPruneToolResults = 2048
	DefaultSummaryMaxTokens = 4096
	// DefaultWindow is used when neither the config nor the provider
	// names a window.
	DefaultWindow = 128000
)

// minShare: an automatic compaction is worth a model call only when what it
// summarizes is at least 1/minShare of the window.
const minShare = 10

// SummaryPrefix starts every summary message, so a person reading a log,
// and the next compaction, can tell the summary from a user's message.
const SummaryPrefix = "[Summary of the earlier conversation, written when it was compacted]\n\n"

// DefaultInstruction asks the model for the summary.
const DefaultInstruction = `Summarize the conversation so far for your own later use: the summary replaces the messages above, which you will no longer see. Keep the user's goals and constraints, decisions made and why, facts learned (file paths, names, commands, results, errors), what was done and what remains to do. Write compact prose and lists, with no preamble, and do not call tools.`

// Config is the plugin's configuration. Zero values take the defaults.
type Config struct {
	// Threshold is the fraction of the window the prompt may fill before
	// a request compacts (default 0.8).
	Threshold float64 `koanf:"threshold" json:"threshold,omitempty"`
	// Keep is the fraction of the window the latest messages may fill and
	// still be kept verbatim (default 0.2).
	Keep float64 `koanf:"keep" json:"keep,omitempty"`
	// Window overrides the provider's context window, in tokens.
	Window int `koanf:"window" json:"window,omitempty"`
	// PruneToolResults is the size in bytes above which an older tool
	// result is cut short before it is summarized (default 2048; -1 keeps
	// them whole).
	PruneToolResults int `koanf:"prune_tool_results" json:"prune_tool_results,omitempty"`
	// SummaryMaxTokens bounds the summary answer (default 4096).
	SummaryMaxTokens int `koanf:"summary_max_tokens" json:"summary_max_tokens,omitempty"`
	// Instruction replaces DefaultInstruction.
	Instruction string `koanf:"instruction" json:"instruction,omitempty"`
}

// Validate checks the config before anything starts.
func (c Config) Validate() error {
	bad := func(key, what string) error {
		return errs.New(errs.InvalidArgument, "session.compact: "+key+" "+what)
	}
	switch {
	case math.IsNaN(c.Threshold) || c.Threshold < 0 || c.Threshold > 1:
		return bad("threshold", fmt.Sprintf("is %v; set a fraction of the window between 0 and 1, such as 0.8", c.Threshold))
	case math.IsNaN(c.Keep) || c.Keep < 0 || c.Keep >= 1:
		return bad("keep", fmt.Sprintf("is %v; set a fraction of the window between 0 and 1, such as 0.2", c.Keep))
	case c.withDefaults().Keep >= c.withDefaults().Threshold:
		return bad("keep", fmt.Sprintf("(%v) must be below threshold (%v), or every request would compact", c.withDefaults().Keep, c.withDefaults().Threshold))
	case c.Window < 0:
		return bad("window", "cannot be negative; leave it out to use the provider's window")
	case c.PruneToolResults < -1:
		return bad("prune_tool_results", "is a size in bytes; use -1 to keep tool results whole")
	case c.SummaryMaxTokens < 0:
		return bad("summary_max_tokens", "cannot be negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.Keep == 0 {
		c.Keep = DefaultKeep
	}
	if c.PruneToolResults == 0 {
		c.PruneToolResults = DefaultPruneToolResults
	}
	if c.SummaryMaxTokens == 0 {
		c.SummaryMaxTokens = DefaultSummaryMaxTokens
	}
	if c.Instruction == "" {
		c.Instruction = DefaultInstruction
	}
	return c
}

// Key is the service key of the manual API.
var Key = dshctx.NewKey[*Service]("session.compact")

// Started is the payload of compact/started.
type Started struct {
	Agent agents.Agent
	// Messages is how many messages will be summarized; Tokens the
	// estimated prompt that triggered it.
	Messages, Tokens int
	Manual           bool
}

// Done is the payload of compact/done: the event recorded, or the error
// when the compaction failed or was cancelled.
type Done struct {
	Agent      agents.Agent
	Compaction session.Compaction
	Elapsed    time.Duration
	Err        error
}

// Events of the plugin, emitted in the agent's scope. The recorded
// history/compacted session event is the durable one; these tell a UI that
// a summary request is running.
var (
	EventStarted = waterfall.NewEmit[Started]("compact/started")
	EventDone    = waterfall.NewEmit[Done]("compact/done")
)

// Plugin is session.compact.
var Plugin = plugin.Register("session.compact", "summarizes older turns when a request nears the model's context window", func(ctx *dshctx.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	models, err := llm.Key.Get(ctx)
	if err != nil {
		return err
	}
	s := &Service{cfg: cfg.withDefaults(), llm: models, agents: map[string]*state{}}
	if _, err := agentloop.EventRequest.On(ctx, s.onRequest); err != nil {
		return err
	}
	if _, err := session.EventAppended.On(ctx, s.onAppended); err != nil {
		return err
	}
	if _, err := agents.EventDisposed.On(ctx, func(_ stdctx.Context, a agents.Agent) error {
		s.mu.Lock()
		delete(s.agents, a.ID())
		s.mu.Unlock()
		return nil
	}); err != nil {
		return err
	}
	return Key.Provide(ctx, s)
}, llm.Key)

// Service compacts the requests of the agents in its scope.
type Service struct {
	cfg Config
	llm *llm.Service

	mu     sync.Mutex
	agents map[string]*state
}

// state is what the plugin knows of one agent.
type state struct {
	// base is the prompt the provider reported for the last step plus
	// its answer, and at the history length after that answer; 0 when
	// unknown (before the first step, after a compaction or a resume).
	base, at int
	// force: compact at the next request.
	force bool
}

func (s *Service) state(id string) *state {
	st := s.agents[id]
	if st == nil {
		st = &state{}
		s.agents[id] = st
	}
	return st
}

// Request asks for a compaction at the agent's next model request, whatever
// the threshold says. It summarizes everything before the latest point
// where the history can be cut: the prompt that started the request, or
// the latest step's tool calls and results, stay verbatim.
func (s *Service) Request(agentID string) {
	s.mu.Lock()
	s.state(agentID).force = true
	s.mu.Unlock()
}

// Window returns the context window used for req.
func (s *Service) Window(req llm.Request) int {
	if s.cfg.Window > 0 {
		return s.cfg.Window
	}
	if w := s.llm.ContextWindow(req.Provider, req.Model); w > 0 {
		return w
	}
	return DefaultWindow
}

// onAppended follows the usage the provider reports for each step.
func (s *Service) onAppended(_ stdctx.Context, a session.Appended) error {
	switch a.Event.Type {
	case session.AssistantMessage:
		if a.Event.Usage == nil || a.Event.Usage.InputTokens == 0 {
			return nil
		}
		n := a.Session.History().Len()
		s.mu.Lock()
		st := s.state(a.Session.AgentID())
		st.base, st.at = a.Event.Usage.InputTokens+a.Event.Usage.OutputTokens, n
		s.mu.Unlock()
	case session.Compacted:
		s.mu.Lock()
		st := s.state(a.Session.AgentID())
		st.base, st.at = 0, 0
		s.mu.Unlock()
	}
	return nil
}

// prompt returns the prompt tokens of req: the last reported usage plus an
// estimate of the messages added since, else an estimate of the whole.
func (s *Service) prompt(id string, req llm.Request) int {
	s.mu.Lock()
	base, at := s.state(id).base, s.state(id).at
	s.mu.Unlock()
	h := req.History
	if base == 0 || at > h.Len() {
		return llm.EstimateRequest(req)
	}
	n := base
	for i := at; i < h.Len(); i++ {
		n += llm.EstimateMessage(h.At(i))
	}
	return n
}

func (s *Service) onRequest(ctx stdctx.Context, e agentloop.RequestEvent, next agentloop.RequestNext) (llm.Request, error) {
	id := e.Agent.ID()
	s.mu.Lock()
	st := s.state(id)
	force := st.force
	st.force = false
	s.mu.Unlock()
	window := s.Window(e.Request)
	tokens := s.prompt(id, e.Request)
	if !force && float64(tokens) < s.cfg.Threshold*float64(window) {
		return next.Call(ctx, e)
	}
	// The cut is made in the session's history, which the recorded event
	// applies to; an earlier listener may have added to the request's.
	sh := e.Agent.Session().History()
	var extra []llm.Message
	if rh := e.Request.History; rh.Len() > sh.Len() {
		extra = rh.Slice(sh.Len(), rh.Len()).Messages()
	}
	// A summary request holds at most what fits in the window, so a
	// history far past it takes a few rounds, each summarizing the last
	// summary and the next part.
	for round := 0; round < maxRounds; round++ {
		c, err := s.compact(ctx, e, sh, window, tokens, force)
		switch {
		case err != nil && ctx.Err() != nil:
			// Aborted or disposed during the summary: the turn stops
			// here, and nothing more was recorded.
			return llm.Request{}, err
		case err != nil:
			agents.EventError.Emit(ctx, e.Agent.Context(), agents.ErrorReport{Agent: e.Agent, Err: err})
		}
		if c == nil {
			break
		}
		sh = e.Agent.Session().History()
		e.Request.History = sh
		if len(extra) > 0 {
			e.Request.History = sh.Append(extra...)
		}
		tokens = llm.EstimateRequest(e.Request)
		if force || float64(tokens) < s.cfg.Threshold*float64(window) {
			break
		}
	}
	return next.Call(ctx, e)
}

// maxRounds bounds the summary requests made for one model request.
const maxRounds = 4

// compact summarizes the older part of e's history and records it. It
// returns nil without error when there is nothing to summarize.
func (s *Service) compact(ctx stdctx.Context, e agentloop.RequestEvent, h llm.History, window, tokens int, manual bool) (*session.Compaction, error) {
	keep := int(s.cfg.Keep * float64(window))
	if manual {
		// Asked for: summarize all but the latest exchange.
		keep = 0
	}
	// A compaction asked for that finds nothing to do says so, or the
	// person who asked would wait for an answer that never comes.
	nothing := func() (*session.Compaction, error) {
		if manual {
			EventDone.Emit(ctx, e.Agent.Context(), Done{Agent: e.Agent, Err: errs.New(Nothing,
				"there is nothing to summarize: the history holds only the latest exchange (and perhaps an earlier summary)")})
		}
		return nil, nil
	}
	cut := Cut(h, keep)
	if cut <= 0 {
		return nothing()
	}
	// The summary request must fit in the window with its answer: cut
	// earlier when the part to summarize is too large; a later round
	// takes the rest.
	room := window - min(s.cfg.SummaryMaxTokens, window/5) - llm.EstimateRequest(llm.Request{System: e.Request.System, Tools: e.Request.Tools}) - llm.EstimateText(s.cfg.Instruction)
	if fit := Fit(h, cut, room, s.cfg.PruneToolResults); fit < cut {
		cut = fit
		if cut <= 0 {
			return nothing()
		}
	}
	if !manual && llm.EstimateRequest(llm.Request{History: h.Slice(0, cut)}) < window/minShare {
		// What could be summarized is small: the prompt is large for
		// another reason (system prompt, tools, the current step), and a
		// summary request at every step would not shrink it.
		return nil, nil
	}
	start := time.Now()
	EventStarted.Emit(ctx, e.Agent.Context(), Started{Agent: e.Agent, Messages: cut, Tokens: tokens, Manual: manual})
	text, usage, err := s.summarize(ctx, e.Agent, e.Request, h.Slice(0, cut))
	if err != nil {
		EventDone.Emit(ctx, e.Agent.Context(), Done{Agent: e.Agent, Elapsed: time.Since(start), Err: err})
		return nil, err
	}
	msg := llm.Message{ID: uuid.NewString(), Role: llm.RoleUser, Content: SummaryPrefix + text}
	c := session.Compaction{
		Summarized: cut, Turns: turns(h.Slice(0, cut)), Kept: h.Len() - cut,
		Before: llm.EstimateRequest(llm.Request{History: h}), SummaryTokens: llm.EstimateMessage(msg), Manual: manual,
	}
	c.After = c.SummaryTokens + llm.EstimateRequest(llm.Request{History: h.Slice(cut, h.Len())})
	if usage.OutputTokens > 0 {
		c.SummaryTokens = usage.OutputTokens
	}
	sess := e.Agent.Session()
	// Recording outlives an abort that comes now: the summary is paid for.
	rec := stdctx.WithoutCancel(ctx)
	// Provider and model name what answered the summary request, so the
	// usage accounting prices it like a step.
	sess.Append(rec, session.Event{Type: session.Compacted, Turn: e.Turn, Step: e.Step, Message: &msg, Usage: &usage, Compaction: &c,
		Provider: e.Request.Provider, Model: e.Request.Model})
	if err := sess.Flush(rec); err != nil {
		agents.EventError.Emit(rec, e.Agent.Context(), agents.ErrorReport{Agent: e.Agent, Err: errs.Wrap(session.FlushFailed, err, fmt.Sprintf(
			"flushing session %q after its compaction failed; the next checkpoint writes it", sess.ID()))})
	}
	EventDone.Emit(rec, e.Agent.Context(), Done{Agent: e.Agent, Compaction: c, Elapsed: time.Since(start)})
	return &c, nil
}

// summarize streams the summary of older from the agent's model.
func (s *Service) summarize(ctx stdctx.Context, a agents.Agent, req llm.Request, older llm.History) (string, llm.Usage, error) {
	msgs := older.Messages()
	if limit := s.cfg.PruneToolResults; limit > 0 {
		for i := range msgs {
			msgs[i] = Prune(msgs[i], limit)
		}
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: s.cfg.Instruction})
	// Same system prompt and tools as the agent's requests, so the
	// provider's cache serves the summary request's prefix too.
	sum := llm.Request{
		AgentID: req.AgentID, Provider: req.Provider, Model: req.Model,
		System: req.System, Tools: req.Tools, History: llm.NewHistory(msgs...),
		MaxTokens: s.cfg.SummaryMaxTokens, Temperature: req.Temperature,
	}
	fail := func(err error, what string) (string, llm.Usage, error) {
		if ctx.Err() != nil {
			return "", llm.Usage{}, stdctx.Cause(ctx)
		}
		return "", llm.Usage{}, errs.Wrap(Failed, err, fmt.Sprintf(
			"compacting the history of agent %q: %s; the request goes on uncompacted (check provider %q, or raise threshold)", a.ID(), what, req.Provider))
	}
	st, err := s.llm.In(a.Context()).Stream(ctx, sum)
	if err != nil {
		return fail(err, "the summary request failed")
	}
	defer st.Close()
	asm := &llm.Assembler{}
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(err, "the summary stream failed")
		}
		if ctx.Err() != nil {
			return "", llm.Usage{}, stdctx.Cause(ctx)
		}
		asm.Add(c)
		if c.Kind == llm.ChunkFinish {
			break
		}
	}
	finish, ferr := asm.Finish()
	text := strings.TrimSpace(asm.Message().Content)
	switch {
	case finish == llm.FinishError:
		return fail(errors.New(ferr), "the model reported an error")
	case text == "":
		return fail(errors.New("empty summary"), "the model answered without text")
	}
	return text, asm.Usage(), nil
}

// Prune cuts a tool result longer than limit bytes to its first limit
// bytes and says how much was left out.
func Prune(m llm.Message, limit int) llm.Message {
	if m.Role != llm.RoleTool || len(m.Content) <= limit {
		return m
	}
	cut := limit
	for cut > 0 && cut < len(m.Content) && !utf8Start(m.Content[cut]) {
		cut--
	}
	m.Content = fmt.Sprintf("%s\n[… %d more bytes of this tool result were pruned before compaction]", m.Content[:cut], len(m.Content)-cut)
	return m
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Cut returns where to split h: messages before the index are summarized,
// the rest kept verbatim. It is the earliest point whose tail fits in keep
// tokens, else the latest possible one, and 0 when there is nothing to
// summarize. A cut never falls between an assistant message's tool calls
// and their results, nor right before a tool result, and always keeps the
// last message.
func Cut(h llm.History, keep int) int {
	n := h.Len()
	if n < 2 {
		return 0
	}
	tail := make([]int, n+1)
	for i := n - 1; i >= 0; i-- {
		tail[i] = tail[i+1] + llm.EstimateMessage(h.At(i))
	}
	open := map[string]bool{}
	latest := 0
	for i := range n {
		m := h.At(i)
		if i > 0 && len(open) == 0 && m.Role != llm.RoleTool {
			if tail[i] <= keep {
				return worth(h, i)
			}
			latest = i
		}
		switch m.Role {
		case llm.RoleAssistant:
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case llm.RoleTool:
			delete(open, m.ToolCallID)
		}
	}
	return worth(h, latest)
}

// Fit returns the latest cut at or before cut whose messages, pruned at
// prune bytes, fit in room tokens; 0 when none does.
func Fit(h llm.History, cut, room, prune int) int {
	best, sum := 0, 0
	open := map[string]bool{}
	for i := range cut {
		m := h.At(i)
		if i > 0 && len(open) == 0 && m.Role != llm.RoleTool {
			if sum > room {
				break
			}
			best = i
		}
		switch m.Role {
		case llm.RoleAssistant:
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case llm.RoleTool:
			delete(open, m.ToolCallID)
		}
		if prune > 0 {
			m = Prune(m, prune)
		}
		sum += llm.EstimateMessage(m)
	}
	if sum <= room {
		return cut
	}
	return worth(h, best)
}

// worth returns cut, or 0 when the messages before it are only an earlier
// summary.
func worth(h llm.History, cut int) int {
	if cut == 1 && strings.HasPrefix(h.At(0).Content, SummaryPrefix) {
		return 0
	}
	return cut
}

// turns counts the user turns in h, not counting an earlier summary.
func turns(h llm.History) int {
	n := 0
	for _, m := range h.All() {
		if m.Role == llm.RoleUser && !strings.HasPrefix(m.Content, SummaryPrefix) {
			n++
		}
	}
	return n
}
