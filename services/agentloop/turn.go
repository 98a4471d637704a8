package agentloop

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/dsh-go/dsh/telemetry"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/google/uuid"
)

// Codes of the agent loop.
const (
	// StreamIncomplete: the model stream ended without a finish.
	StreamIncomplete errs.Code = "AGENT_STREAM_INCOMPLETE"
	// ModelError: the model finished with an error.
	ModelError errs.Code = "AGENT_MODEL_ERROR"
	// TooManySteps: a turn reached the step limit.
	TooManySteps errs.Code = "AGENT_TOO_MANY_STEPS"
)

// drive runs turns while messages are queued, then goes idle and exits.
// It holds the pen throughout, but for its waits on the model and on tool
// calls.
func (a *ReactLoopAgent) drive() {
	a.pen <- struct{}{}
	defer func() { <-a.pen }()
	for {
		a.recordDropped()
		a.mu.Lock()
		a.cancelled = false // a cancel governs one turn: the one in this iteration
		a.aborting = false  // so does an abort
		if a.inbox.queued.len() == 0 && a.inbox.steering.len() > 0 && !a.disposed {
			// Steering that arrived with no turn running starts one.
			for _, m := range a.inbox.steering.drain() {
				a.inbox.queued.push(m)
			}
		}
		// Everything queued by now goes into this turn together; what is
		// queued after it started waits for the next.
		msgs := a.inbox.queued.drain()
		a.busy = len(msgs) > 0 && !a.disposed
		if len(msgs) == 0 || a.disposed {
			a.mu.Unlock()
			// Report idle while still counted as driving, so a message
			// that arrives meanwhile is picked up here and WhenIdle
			// returns only after the status says idle.
			a.setStatus(agents.StatusIdle)
			a.mu.Lock()
			// Outcomes and records handed over meanwhile are written
			// also after a dispose began: the dispose waits for this
			// driver, and what it leaves behind no one would append.
			queued := a.inbox.queued.len()+a.inbox.steering.len() > 0 && !a.disposed
			if queued || len(a.drops)+len(a.refusals)+len(a.decisions)+len(a.records) > 0 {
				a.mu.Unlock()
				continue
			}
			a.driving = false
			a.idleLocked()
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		a.runTurn(msgs)
	}
}

// checkStop reports why the turn must stop now, or "".
func (a *ReactLoopAgent) checkStop() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.disposed:
		return ReasonDisposed
	case a.cancelled || a.aborting:
		return ReasonAborted
	}
	return ""
}

// runTurn runs one turn for msgs, the messages drained from the queue.
// Whatever fails inside, the turn ends with a reason and the driver goes on.
func (a *ReactLoopAgent) runTurn(msgs []llm.Message) {
	// The turn does not start when it was cancelled before it started:
	// right after it was taken from the queue and after the status turned
	// running. Its messages are then recorded as dropped.
	if a.checkStop() != "" {
		a.dropTaken(msgs)
		return
	}
	a.setStatus(agents.StatusRunning)
	if a.checkStop() != "" {
		a.dropTaken(msgs)
		return
	}
	// Abort cancels this context: it spans the whole turn, so an abort
	// between steps or during the first checkpoint is not lost either.
	base, span := a.startTurn(msgs)
	turnCtx, cancel := stdctx.WithCancel(base)
	defer cancel()
	a.mu.Lock()
	if a.disposed || a.cancelled {
		a.mu.Unlock()
		a.dropTaken(msgs)
		return
	}
	a.turn++
	turn := a.turn
	a.abortStep = cancel
	a.turnCtx = base
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.abortStep = nil
		a.turnCtx = nil
		a.mu.Unlock()
	}()

	// Recording and checkpoints outlive an abort: they use their own
	// context, which carries only the turn's span.
	ctx := base
	// The admission records of the turn's messages come before it, and
	// so do the outcomes handed over before it started (a refusal, a
	// withdrawal): its prompt's checkpoint makes them durable, rather
	// than its end.
	a.appendHanded(turn)
	a.sess.Append(ctx, session.Event{Type: session.TurnStart, Turn: turn})
	if l := a.scope.Logger(); l.IsDebug() {
		telemetry.Logger(ctx, l).Debug("turn started", "agent", a.id, "session", a.sess.ID(), "turn", turn, "messages", len(msgs))
	}
	a.unattended = false
	a.stopped = Stop{}
	a.sources = nil
	for i := range msgs {
		a.unattended = a.unattended || msgs[i].Unattended
		a.noteSource(msgs[i])
		a.noteParts(msgs[i])
		a.sess.Append(ctx, session.Event{Type: session.UserMessage, Turn: turn, Message: &msgs[i], RequestID: msgs[i].RequestID})
	}
	// The prompt is durable before the model sees it: a process killed
	// mid-turn loses the answer, never the question.
	a.flush(ctx)

	reason, err := a.steps(turnCtx, turn)
	end := session.Event{Type: session.TurnEnd, Turn: turn, Reason: reason}
	// An abort or a dispose also surfaces as an error from whatever it
	// interrupted; only a real failure is recorded and reported as one.
	if err != nil && reason == ReasonError {
		end.Error = err.Error()
		a.reportError(err)
	}
	if a.stopped.Reason != "" && reason == a.stopped.Reason {
		end.Error = a.stopped.Message
	}
	a.sess.Append(ctx, end)
	a.recordDropped()
	a.flush(ctx)
	if l := a.scope.Logger(); l.IsDebug() {
		// The error's code, not its text: a provider's message may quote
		// what the request carried.
		telemetry.Logger(ctx, l).Debug("turn ended", "agent", a.id, "session", a.sess.ID(), "turn", turn, "reason", reason, "error", errs.CodeOf(err))
	}
	a.endTurn(span, turn, reason, err)

	// Steering that came too late for this turn starts the next one, ahead
	// of what was queued.
	a.mu.Lock()
	if left := a.inbox.steering.drain(); len(left) > 0 && !a.disposed {
		a.inbox.queued.items = append(left, a.inbox.queued.items...)
	}
	a.mu.Unlock()
}

// flush runs the session/flush checkpoint; a failure is reported and the
// turn goes on, and the next checkpoint covers what this one missed —
// unless the session is fenced: another owner writes it now (a shared
// store's lease ran out), no checkpoint of this copy can ever succeed, and
// going on would call the model and run tools for a turn the log records
// as interrupted. The step in flight is aborted instead.
//
// The outcomes handed over since the last checkpoint go into this one
// (see appendRefusals). The caller holds the pen.
func (a *ReactLoopAgent) flush(ctx stdctx.Context) {
	a.appendRefusals()
	err := a.sess.Flush(ctx)
	a.checkpointDone(err)
	if err != nil {
		if errs.Has(err, session.SessionLocked, session.ReasonFenced) {
			a.Abort()
		}
		a.reportError(errs.Wrap(session.FlushFailed, err, fmt.Sprintf(
			"flushing session %q of agent %q failed; the events stay in memory and the next checkpoint writes them", a.sess.ID(), a.id)))
	}
}

// steps runs the steps of a turn and returns how it ended.
func (a *ReactLoopAgent) steps(ctx stdctx.Context, turn int) (reason string, err error) {
	outcome := ReasonCompleted
	maxSteps := a.opts.MaxSteps
	if maxSteps <= 0 {
		maxSteps = a.loop.cfg.MaxSteps
	}
	for step := 1; ; step++ {
		if r := a.checkStop(); r != "" {
			return stronger(outcome, r), nil
		}
		if step > maxSteps {
			return stronger(outcome, ReasonError), errs.New(TooManySteps, fmt.Sprintf(
				"turn %d of agent %q reached %d steps without finishing; raise max_steps if that is expected", turn, a.id, maxSteps))
		}
		if stop, err := a.askStop(ctx, turn, step, false); err != nil {
			return stronger(outcome, a.failureReason()), err
		} else if stop {
			return stronger(outcome, a.stopped.Reason), nil
		}
		cont, maxed, err := a.step(ctx, turn, step)
		if maxed {
			outcome = stronger(outcome, ReasonMaxTokens)
		}
		if err != nil {
			return stronger(outcome, a.failureReason()), err
		}
		if r := a.checkStop(); r != "" {
			return stronger(outcome, r), nil
		}
		if a.stopped.Reason != "" {
			return stronger(outcome, a.stopped.Reason), nil
		}
		if !cont {
			return outcome, nil
		}
	}
}

// askStop dispatches agent/stop and keeps a Stop that ends the turn in
// a.stopped.
func (a *ReactLoopAgent) askStop(ctx stdctx.Context, turn, step int, answered bool) (bool, error) {
	s, err := EventStop.Dispatch(ctx, a.scope, StopCheck{Agent: a, Turn: turn, Step: step, Answered: answered})
	if err != nil {
		return false, err
	}
	if s.Reason == "" {
		return false, nil
	}
	a.stopped = s
	return true, nil
}

// failureReason tells an error apart from an abort or a dispose.
func (a *ReactLoopAgent) failureReason() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.disposed:
		return ReasonDisposed
	case a.aborting || a.cancelled:
		return ReasonAborted
	}
	return ReasonError
}

// step runs one step. cont says whether the turn goes on; maxed whether the
// model hit its output ceiling.
//
// An abort holds for the rest of its turn, also when the step it cancelled
// finishes anyway: ctx is the turn's, and checkStop reports the abort.
func (a *ReactLoopAgent) step(ctx stdctx.Context, turn, step int) (cont, maxed bool, err error) {
	if a.checkStop() != "" {
		return false, false, nil
	}
	ctx, span := a.startStep(ctx, turn, step)
	defer func() { a.endStep(span, err) }()
	rec := telemetry.Detach(stdctx.Background(), ctx)
	a.sess.Append(rec, session.Event{Type: session.StepStart, Turn: turn, Step: step})
	steered := a.recordSteering(turn, step)

	system, err := a.loop.prompt.Assemble(ctx, a.scope)
	if err != nil {
		return false, false, err
	}
	req, err := EventRequest.Dispatch(ctx, a.scope, RequestEvent{Agent: a, Turn: turn, Step: step, Request: llm.Request{
		AgentID:   a.id,
		Provider:  a.opts.Provider,
		Model:     a.opts.Model,
		System:    system,
		History:   a.sess.History(),
		Tools:     a.loop.tools.Specs(a.scope),
		MaxTokens: a.opts.MaxTokens,
		Limits:    a.opts.Limits,
	}})
	if err != nil {
		return false, false, err
	}
	if req.History, err = a.resolveParts(req.History); err != nil {
		return false, false, err
	}

	msgID := uuid.NewString()
	// The outcome writer may append while the model answers: its
	// outcomes are not the step's, and a sender waits for them.
	<-a.pen
	asm, err := a.stream(ctx, req, turn, step, msgID)
	a.pen <- struct{}{}
	if err != nil {
		a.keepCut(asm, turn, step, msgID, req)
		return false, false, err
	}
	finish, finishErr := asm.Finish()
	switch finish {
	case "":
		return false, false, errs.New(StreamIncomplete, fmt.Sprintf(
			"the model stream of provider %q ended without a finish reason", req.Provider))
	case llm.FinishError:
		return false, false, errs.New(ModelError, fmt.Sprintf("provider %q reported an error: %s", req.Provider, finishErr))
	}

	msg := asm.Message()
	msg.ID = msgID
	res, err := EventStepResult.Dispatch(ctx, a.scope, StepResult{
		Agent: a, Turn: turn, Step: step, Message: msg, Usage: asm.Usage(), Finish: finish,
	})
	if err != nil {
		return false, false, err
	}
	res.Message.Role = llm.RoleAssistant
	if res.Message.ID == "" {
		res.Message.ID = msgID
	}
	usage := res.Usage
	a.sess.Append(rec, session.Event{Type: session.AssistantMessage, Turn: turn, Step: step,
		Message: &res.Message, Usage: &usage, Finish: res.Finish, Provider: req.Provider, Model: req.Model})

	maxed = res.Finish == llm.FinishMaxTokens
	calls := res.Message.ToolCalls
	if maxed && len(calls) > 0 {
		// A reply cut at the output ceiling may carry half-written
		// calls: none run, and the history still answers each one.
		a.answerUnrun(turn, step, calls, "not executed: the reply hit the output token limit")
		calls = nil
	}
	// A budget that ran out with this answer stops the turn before its
	// calls run: like a cut reply's, each is answered as not executed.
	if stop, err := a.askStop(ctx, turn, step, true); err != nil {
		return false, maxed, err
	} else if stop {
		a.answerUnrun(turn, step, calls, "not executed: "+a.stopped.Message)
		a.sess.Append(rec, session.Event{Type: session.StepEnd, Turn: turn, Step: step})
		return false, maxed, nil
	}
	executed, err := a.runTools(ctx, turn, step, calls)
	if err != nil {
		return false, maxed, err
	}

	if a.checkStop() != "" {
		// Steering that arrives now waits for the next turn.
		return false, maxed, nil
	}
	steered += a.recordSteering(turn, step)
	cont, err = EventContinuation.Dispatch(ctx, a.scope, Continuation{
		Agent: a, Turn: turn, Step: step, ToolCalls: executed, Steering: steered, Finish: res.Finish,
	})
	if err != nil {
		return false, maxed, err
	}
	a.sess.Append(rec, session.Event{Type: session.StepEnd, Turn: turn, Step: step})
	if cont {
		// The step is the unit of durability: a crash in a later step
		// loses none of this one. The last step needs no checkpoint of
		// its own; the turn's end, next, is one.
		a.flush(rec)
	}
	return cont, maxed, nil
}

// stream calls the model and hands each chunk to agent/stream-chunk as it
// arrives; only the assembled message goes into the session. On an error
// the assembler still holds what arrived before it (see keepCut).
func (a *ReactLoopAgent) stream(ctx stdctx.Context, req llm.Request, turn, step int, msgID string) (_ *llm.Assembler, err error) {
	asm := &llm.Assembler{}
	// A value, not a pointer: the deferred closure keeps it on the
	// stack, so a sampled-out request allocates nothing for its span.
	var m modelSpan
	if telemetry.Enabled() {
		ctx, m = a.startModel(ctx, req)
		defer func() { m.end(asm, err) }()
	}
	s, err := a.loop.llm.In(a.scope).Stream(ctx, req)
	if err != nil {
		return asm, err
	}
	defer s.Close()
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return asm, nil
		}
		if err != nil {
			return asm, err
		}
		if ctx.Err() != nil {
			// Aborted or disposed: stop reading a provider that does not.
			return asm, stdctx.Cause(ctx)
		}
		asm.Add(c)
		if m.a != nil {
			m.chunk()
		}
		EventStreamChunk.Emit(ctx, a.scope, StreamChunk{Agent: a, Turn: turn, Step: step, MessageID: msgID, Chunk: c})
		if c.Kind == llm.ChunkFinish {
			return asm, nil
		}
	}
}

// noteSource adds who is behind msg to the turn's sources, once each: a
// steering message from someone else widens who the turn's calls act for.
func (a *ReactLoopAgent) noteSource(msg llm.Message) {
	if msg.From == nil {
		return
	}
	for _, s := range a.sources {
		if provenanceEqual(s, *msg.From) {
			return
		}
	}
	a.sources = append(a.sources, *msg.From)
}

func provenanceEqual(x, y llm.Provenance) bool {
	if x.Principal != y.Principal || x.Entry != y.Entry || (x.OnBehalfOf == nil) != (y.OnBehalfOf == nil) {
		return false
	}
	return x.OnBehalfOf == nil || *x.OnBehalfOf == *y.OnBehalfOf
}

// recordSteering moves the steering FIFO into the session.
func (a *ReactLoopAgent) recordSteering(turn, step int) int {
	a.mu.Lock()
	msgs := a.inbox.steering.drain()
	a.mu.Unlock()
	if len(msgs) > 0 {
		a.recordDecisions(turn, step)
		// A steer accepted during the turn has its message/queued
		// handed over; it goes first, so the steering/message is the
		// request's last event, its outcome.
		a.appendRefusals()
	}
	for i := range msgs {
		a.unattended = a.unattended || msgs[i].Unattended
		a.noteSource(msgs[i])
		a.noteParts(msgs[i])
		a.sess.Append(stdctx.Background(), session.Event{Type: session.SteeringMessage, Turn: turn, Step: step, Message: &msgs[i], RequestID: msgs[i].RequestID})
	}
	return len(msgs)
}

// answerUnrun records an error result for calls that will not run, so the
// next request never carries a call without its answer.
func (a *ReactLoopAgent) answerUnrun(turn, step int, calls []llm.ToolCall, why string) {
	for _, c := range calls {
		a.sess.Append(stdctx.Background(), session.Event{Type: session.ToolResult, Turn: turn, Step: step, Message: &llm.Message{
			Role: llm.RoleTool, ToolCallID: c.ID, Content: why, IsError: true,
		}})
	}
}

func rawArgs(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}
