package hooks

import (
	stdctx "context"
	"fmt"
	"strings"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugins/session/compact"
	"github.com/dsh-go/dsh/plugins/tools/permission"
	subagentpkg "github.com/dsh-go/dsh/plugins/tools/subagent"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
)

// maxContext bounds the hook context one agent's system prompt carries;
// the oldest entries go first.
const maxContext = 16 << 10

// maxSessionEnd bounds how long an agent's disposal waits for its
// SessionEnd hooks, and a person's question for Notification hooks (a
// variable for the tests).
var maxSessionEnd = 30 * time.Second

// maxPending bounds the PreToolUse context one agent keeps for calls
// that have not run yet.
const maxPending = 256

// mount registers a listener for each stage that has hooks.
func (p *hooks) mount(ctx *dshctx.Context) error {
	has := func(e string) bool { return len(p.byEvent[e]) > 0 }
	var err error
	on := func(f func() (func(), error)) {
		if err == nil {
			_, err = f()
		}
	}
	// On the root, hooks go before the policies, so a rewritten call is
	// what the policies judge (see docs/hooks.md).
	var opts []waterfall.Option
	if ctx.Tag() == "" {
		opts = append(opts, waterfall.Prepend)
	}
	if has(UserPromptSubmit) {
		on(func() (func(), error) { return agentcontroller.EventAdmission.On(ctx, p.admission) })
	}
	if has(PreToolUse) || has(PermissionRequest) {
		on(func() (func(), error) { return tools.EventApprove.On(ctx, p.approveAll, opts...) })
	}
	if has(PreToolUse) || has(PostToolUse) || has(PostToolUseFailure) {
		on(func() (func(), error) { return tools.EventExecute.On(ctx, p.execute) })
	}
	if has(Stop) || has(SubagentStop) || has(PreToolUse) || has(PostToolUse) || has(PostToolUseFailure) {
		on(func() (func(), error) { return agentloop.EventContinuation.On(ctx, p.continuation) })
	}
	if has(SessionStart) {
		on(func() (func(), error) { return agents.EventCreated.On(ctx, p.created) })
		on(func() (func(), error) { return compact.EventDone.On(ctx, p.compacted) })
	}
	if has(Notification) {
		on(func() (func(), error) { return approval.EventRequested.On(ctx, p.notify) })
	}
	if has(PreCompact) {
		on(func() (func(), error) { return compact.EventStarted.On(ctx, p.precompact) })
	}
	if has(SubagentStart) || has(SubagentStop) {
		on(func() (func(), error) { return subagentpkg.EventStarted.On(ctx, p.subagentStarted) })
	}
	if has(UserPromptSubmit) || has(SessionStart) || has(SubagentStart) {
		on(func() (func(), error) { return systemprompt.EventAssemble.On(ctx, p.assemble) })
	}
	on(func() (func(), error) {
		return agents.EventDisposed.On(ctx, func(ectx stdctx.Context, a agents.Agent) error {
			if has(SessionEnd) {
				p.sessionEnd(ectx, a)
			}
			p.mu.Lock()
			delete(p.state, a.ID())
			p.mu.Unlock()
			return nil
		})
	})
	return err
}

// admission runs UserPromptSubmit: a block or "continue": false refuses
// the message; context is kept for the system prompt once the message is
// admitted.
func (p *hooks) admission(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
	if subagent(a.Agent) {
		return next.Call(ctx, a)
	}
	prompt := a.Message.Content
	rs := p.fire(ctx, UserPromptSubmit, "", input{Prompt: &prompt}, whereOf(a.Agent))
	if ctx.Err() != nil {
		return agentcontroller.Decision{}, stdctx.Cause(ctx)
	}
	for _, r := range rs {
		if r.stop {
			return agentcontroller.Reject(ReasonBlocked, "a UserPromptSubmit hook stopped the message: "+r.stopReason, false), nil
		}
	}
	if why := reasons(rs, func(r reply) bool { return r.block }); why != "" {
		return agentcontroller.Reject(ReasonBlocked, "a UserPromptSubmit hook blocked the message: "+why, false), nil
	}
	d, err := next.Call(ctx, a)
	if err == nil && d.Kind == agentcontroller.DecisionAdmit {
		p.addContext(a.Agent.ID(), rs, false)
	}
	return d, err
}

// approveAll runs PreToolUse, then PermissionRequest when the call would
// ask a person.
func (p *hooks) approveAll(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
	v, err := p.approve(ctx, a, next)
	if err != nil || v.Decision != tools.Ask || len(p.byEvent[PermissionRequest]) == 0 {
		return v, err
	}
	return p.permissionRequest(ctx, a, v)
}

// permissionRequest runs PermissionRequest for a call whose verdict asks
// a person, as Claude Code runs it when it is about to show a permission
// prompt: a hook's allow (with updatedInput, validated again) or deny
// answers instead of the person; none asks as before. Deny wins over
// allow. interrupt: true also ends the turn.
func (p *hooks) permissionRequest(ctx stdctx.Context, a tools.Approval, ask tools.Verdict) (tools.Verdict, error) {
	w := p.locate(a.Call.AgentID, a.Call.Workspace)
	args := a.Call.Arguments
	if len(ask.Arguments) > 0 {
		args = ask.Arguments
	}
	in := input{ToolName: claudeName(a.Call.Name), DshToolName: a.Call.Name, ToolInput: forHook(a.Call.Name, args, w.workspace), ToolUseID: a.Call.ID}
	rs := p.fire(ctx, PermissionRequest, a.Call.Name, in, w)
	if ctx.Err() != nil {
		return tools.Verdict{}, stdctx.Cause(ctx)
	}
	p.noteStops(a.Call.AgentID, rs)
	decision := tools.Decision("")
	for _, r := range rs {
		// "continue": false comes before any decision, as in approve: an
		// allow beside it must not run the call.
		if r.stop {
			r.decision = tools.Deny
		}
		if rank(r.decision) > rank(decision) && r.decision != tools.Ask {
			decision = r.decision
		}
	}
	source := p.source + ":" + PermissionRequest
	switch decision {
	case tools.Deny:
		why := reasons(rs, func(r reply) bool { return r.decision == tools.Deny })
		for _, r := range rs {
			if r.stop && r.decision != tools.Deny {
				why = strings.TrimPrefix(why+"; "+r.stopReason, "; ")
			}
		}
		return tools.Verdict{Decision: tools.Deny, Reason: why, Source: source}, nil
	case tools.Allow:
		v := tools.Verdict{Decision: tools.Allow, Source: source, Arguments: ask.Arguments}
		for _, r := range rs {
			if r.decision == tools.Allow && r.updatedInput != nil {
				v.Arguments = fromHook(a.Call.Name, args, in.ToolInput, r.updatedInput)
				break
			}
		}
		return v, nil
	}
	return ask, nil
}

// approve runs PreToolUse. Deny (exit 2, a deny or a block) answers at
// once; otherwise the call, rewritten when a hook gave updatedInput, goes
// on to the policies after this one: a hook's allow skips the tool's own
// default (a bash ask) and the ask of tools.permission's mode, but not a
// policy's deny or its ask rule, and a hook's ask asks unless something
// after it denies.
func (p *hooks) approve(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
	if len(p.byEvent[PreToolUse]) == 0 {
		return next.Call(ctx, a)
	}
	w := p.locate(a.Call.AgentID, a.Call.Workspace)
	in := input{ToolName: claudeName(a.Call.Name), DshToolName: a.Call.Name, ToolInput: forHook(a.Call.Name, a.Call.Arguments, w.workspace), ToolUseID: a.Call.ID}
	rs := p.fire(ctx, PreToolUse, a.Call.Name, in, w)
	if ctx.Err() != nil {
		return tools.Verdict{}, stdctx.Cause(ctx)
	}
	p.noteStops(a.Call.AgentID, rs)
	decision := tools.Decision("")
	for _, r := range rs {
		if r.stop {
			r.decision = tools.Deny
		}
		if rank(r.decision) > rank(decision) {
			decision = r.decision
		}
	}
	source := p.source + ":" + PreToolUse
	var notes []string
	for _, r := range rs {
		if c := strings.TrimSpace(r.context); c != "" {
			notes = append(notes, "PreToolUse hook context: "+c)
		}
	}
	if decision == tools.Deny {
		why := reasons(rs, func(r reply) bool { return r.decision == tools.Deny })
		for _, r := range rs {
			if r.stop {
				why = strings.TrimPrefix(why+"; "+r.stopReason, "; ")
			}
		}
		if len(notes) > 0 {
			why += "\n\n" + strings.Join(notes, "\n")
		}
		return tools.Verdict{Decision: tools.Deny, Reason: why, Source: source}, nil
	}
	if len(notes) > 0 {
		// Claude Code adds it to the model's context before the tool
		// runs; the result is what the model reads next, so execute
		// appends it there.
		p.mu.Lock()
		st := p.agent(a.Call.AgentID)
		if st.preContext == nil || len(st.preContext) >= maxPending {
			// A call a later policy refused never reaches execute.
			st.preContext = map[string][]string{}
		}
		st.preContext[a.Call.ID] = notes
		p.mu.Unlock()
	}
	var rewrite []byte
	for _, r := range rs {
		if r.updatedInput == nil {
			continue
		}
		if rewrite != nil {
			p.log.Warn(fmt.Sprintf("PreToolUse hook %q also rewrote the call; the first rewrite in config order is used", r.hook.command), "tool", a.Call.Name)
			continue
		}
		rewrite = fromHook(a.Call.Name, a.Call.Arguments, in.ToolInput, r.updatedInput)
	}
	if rewrite != nil {
		a.Call.Arguments = rewrite
	}
	inner, err := next.Call(ctx, a)
	if err != nil {
		return inner, err
	}
	if rewrite != nil && len(inner.Arguments) == 0 {
		inner.Arguments = rewrite
	}
	switch {
	case inner.Decision == tools.Deny, decision == "":
		return inner, nil
	case decision == tools.Ask:
		return tools.Verdict{Decision: tools.Ask, Reason: reasons(rs, func(r reply) bool { return r.decision == tools.Ask }),
			Source: source, Arguments: inner.Arguments}, nil
	case inner.Source != "" && !permission.Prompt(inner):
		// allow: a policy's rule stands (an ask rule, as Claude Code's ask
		// rules stand before a hook's allow); the tool's own default and
		// tools.permission's mode, Claude Code's permission prompt, do not.
		return inner, nil
	default:
		return tools.Verdict{Decision: tools.Allow, Reason: reasons(rs, func(r reply) bool { return r.decision == tools.Allow }),
			Source: source, Arguments: inner.Arguments}, nil
	}
}

// any reports whether a hook of event matches tool.
func (p *hooks) any(event, tool string) bool {
	for i := range p.byEvent[event] {
		if p.byEvent[event][i].match.matches(tool) {
			return true
		}
	}
	return false
}

func rank(d tools.Decision) int {
	switch d {
	case tools.Deny:
		return 3
	case tools.Ask:
		return 2
	case tools.Allow:
		return 1
	}
	return 0
}

// execute runs PostToolUse after the tool: a block's reason and context
// from the hooks are appended to the result as feedback for the model.
func (p *hooks) execute(ctx stdctx.Context, x tools.Execution, next tools.ExecuteNext) (tools.Result, error) {
	p.mu.Lock()
	var notes []string
	if st := p.state[x.Call.AgentID]; st != nil {
		notes = st.preContext[x.Call.ID]
		delete(st.preContext, x.Call.ID)
	}
	p.mu.Unlock()
	if !p.any(PostToolUse, x.Call.Name) && !p.any(PostToolUseFailure, x.Call.Name) {
		res, err := next.Call(ctx, x)
		if err == nil {
			res = appendNotes(res, notes)
		}
		return res, err
	}
	w := p.locate(x.Call.AgentID, x.Call.Workspace)
	existed := exists(x.Call.Name, x.Call.Arguments, w.workspace)
	res, err := next.Call(ctx, x)
	if err != nil || x.Tool == nil || ctx.Err() != nil {
		if err == nil {
			res = appendNotes(res, notes)
		}
		return res, err
	}
	// As in Claude Code: PostToolUse after a call that succeeded,
	// PostToolUseFailure, with the error, after one that failed.
	event := PostToolUse
	in := input{ToolName: claudeName(x.Call.Name), DshToolName: x.Call.Name, ToolInput: forHook(x.Call.Name, x.Call.Arguments, w.workspace), ToolUseID: x.Call.ID}
	if res.IsError {
		event = PostToolUseFailure
		// is_interrupt is a person's interruption: a bash command
		// cancelled, not one that timed out.
		interrupted := x.Call.Name == "bash" && strings.Contains(res.Content, "\ncancelled: ")
		in.Error, in.IsInterrupt = &res.Content, &interrupted
	} else {
		in.ToolResponse = response(x.Call.Name, x.Call.Arguments, w.workspace, res, existed)
	}
	rs := p.fire(ctx, event, x.Call.Name, in, w)
	if ctx.Err() != nil {
		return res, stdctx.Cause(ctx)
	}
	p.noteStops(x.Call.AgentID, rs)
	for _, r := range rs {
		if r.block {
			notes = append(notes, fmt.Sprintf("%s hook feedback: %s", event, r.reason))
		}
		if r.context != "" {
			notes = append(notes, fmt.Sprintf("%s hook context: %s", event, r.context))
		}
		if r.stop {
			notes = append(notes, fmt.Sprintf("A %s hook ended the turn: %s", event, r.stopReason))
		}
	}
	return appendNotes(res, notes), nil
}

// appendNotes appends the hooks' notes to a result's text, after a blank
// line.
func appendNotes(res tools.Result, notes []string) tools.Result {
	if len(notes) > 0 {
		if res.Content != "" && !strings.HasSuffix(res.Content, "\n") {
			res.Content += "\n"
		}
		res.Content += "\n" + strings.Join(notes, "\n")
	}
	return res
}

// noteStops remembers a "continue": false, which ends the turn at the
// next continuation.
func (p *hooks) noteStops(agentID string, rs []reply) {
	for _, r := range rs {
		if r.stop {
			p.mu.Lock()
			p.agent(agentID).stopRequested = r.stopReason
			p.mu.Unlock()
			return
		}
	}
}

// continuation ends the turn a hook stopped, and runs Stop hooks when the
// turn would end: a block keeps it going, with the reasons handed to the
// model as a steering message, at most MaxStopContinuations times.
func (p *hooks) continuation(ctx stdctx.Context, c agentloop.Continuation, next agentloop.ContinuationNext) (bool, error) {
	id := c.Agent.ID()
	p.mu.Lock()
	st := p.agent(id)
	stopped := st.stopRequested
	st.stopRequested = ""
	if st.stopTurn != c.Turn {
		// Feedback a cancelled turn never read is not this turn's.
		st.stopTurn, st.stopCount, st.fed = c.Turn, 0, 0
	}
	active := st.stopCount > 0
	own := min(st.fed, c.Steering)
	st.fed = 0
	p.mu.Unlock()
	c.Steering -= own
	cont, err := next.Call(ctx, c)
	if err != nil {
		return cont, err
	}
	if stopped != "" {
		p.log.Info("a hook ended the turn (continue: false): "+stopped, "agent", id, "turn", c.Turn)
		return false, nil
	}
	// A subagent's turn end is SubagentStop's, as in Claude Code, not
	// Stop's; its matchers select the subagent's name.
	event, tool, in := Stop, "", input{StopHookActive: &active}
	if subagent(c.Agent) {
		p.mu.Lock()
		name := st.subagentName
		p.mu.Unlock()
		event, tool = SubagentStop, name
		in.SubagentID, in.AgentType = id, name
	}
	if cont || len(p.byEvent[event]) == 0 {
		return cont, nil
	}
	in.LastAssistantMessage = lastAnswer(c.Agent)
	rs := p.fire(ctx, event, tool, in, whereOf(c.Agent))
	if ctx.Err() != nil {
		return false, stdctx.Cause(ctx)
	}
	for _, r := range rs {
		if r.stop {
			return false, nil
		}
	}
	why := reasons(rs, func(r reply) bool { return r.block })
	if why == "" {
		return false, nil
	}
	p.mu.Lock()
	over := st.stopCount >= p.cfg.MaxStopContinuations
	if !over {
		st.stopCount++
		st.fed++
	}
	p.mu.Unlock()
	if over {
		p.log.Warn(fmt.Sprintf("%s hooks blocked the end of the turn %d times already (max_stop_continuations); the turn ends: %s",
			event, p.cfg.MaxStopContinuations, why), "agent", id, "turn", c.Turn)
		return false, nil
	}
	msg := llm.Message{Role: llm.RoleUser, Content: event + " hook feedback: " + why}
	if err := c.Agent.Steer(msg); err != nil {
		p.log.Warn(fmt.Sprintf("could not hand a %s hook's feedback to the agent; the turn ends", event), "agent", id, "error", err)
		return false, nil
	}
	return true, nil
}

// created runs SessionStart for a new agent: its context goes into the
// system prompt; a block has nothing to stop and is logged.
func (p *hooks) created(ctx stdctx.Context, a agents.Agent) error {
	if subagent(a) {
		return nil
	}
	source := "startup"
	if s := a.Session(); s != nil {
		for _, e := range s.Events(1) {
			if e.Type == session.TurnStart {
				source = "resume"
				break
			}
		}
	}
	rs := p.fire(ctx, SessionStart, source, input{Source: source}, whereOf(a))
	for _, r := range rs {
		if r.block {
			p.log.Warn(fmt.Sprintf("SessionStart hook %q blocked, which a session start cannot be: %s", r.hook.command, r.reason), "agent", a.ID())
		}
	}
	p.addContext(a.ID(), rs, true)
	return nil
}

// compacted runs SessionStart again once a compaction is recorded, with
// source "compact", as Claude Code does after it compacts: a hook that
// re-states the facts of the session (the branch, the open issue) states
// them for the summary that now stands for the history. Context it gives
// replaces what SessionStart hooks gave before; a run that gives none
// leaves it.
func (p *hooks) compacted(ctx stdctx.Context, d compact.Done) error {
	if d.Err != nil || d.Agent == nil {
		return nil
	}
	rs := p.fire(ctx, SessionStart, "compact", input{Source: "compact"}, whereOf(d.Agent))
	p.mu.Lock()
	fresh := false
	for _, r := range rs {
		fresh = fresh || strings.TrimSpace(r.context) != ""
	}
	if st := p.state[d.Agent.ID()]; st != nil && fresh {
		st.start = nil
	}
	p.mu.Unlock()
	p.addContext(d.Agent.ID(), rs, true)
	return nil
}

// sessionEnd runs SessionEnd once the agent is disposed and its session
// written, as Claude Code runs it when a session ends. dsh does not know
// why an agent went (a person quitting, a host stopping, a close over
// ACP), so reason is always "other", which the matchers select. A hook
// cannot stop the end; a block is logged.
func (p *hooks) sessionEnd(ctx stdctx.Context, a agents.Agent) {
	if subagent(a) {
		return
	}
	// The agent's disposal waits for them, and a host that stops waits
	// for its agents: a hook that hangs must not hold the shutdown for
	// its whole timeout.
	ctx, cancel := stdctx.WithTimeout(ctx, maxSessionEnd)
	defer cancel()
	rs := p.fire(ctx, SessionEnd, "other", input{Reason: "other"}, whereOf(a))
	if ctx.Err() != nil {
		p.log.Warn(fmt.Sprintf("SessionEnd hooks were stopped after %s, the most the end of an agent waits for them", maxSessionEnd), "agent", a.ID())
	}
	for _, r := range rs {
		if r.block || r.stop {
			p.log.Warn(fmt.Sprintf("SessionEnd hook %q blocked, which the end of a session cannot be: %s", r.hook.command, r.reason+r.stopReason), "agent", a.ID())
		}
	}
}

// subagentStarted notes a subagent's name for SubagentStop, and runs
// SubagentStart, as Claude Code does when it starts a subagent: its
// matchers select the subagent's name, and the context its hooks give
// goes into the subagent's system prompt. It cannot stop the subagent; a
// block is logged.
func (p *hooks) subagentStarted(ctx stdctx.Context, s subagentpkg.Started) error {
	p.mu.Lock()
	p.agent(s.AgentID).subagentName = s.Name
	p.mu.Unlock()
	if len(p.byEvent[SubagentStart]) == 0 {
		return nil
	}
	rs := p.fire(ctx, SubagentStart, s.Name, input{SubagentID: s.AgentID, AgentType: s.Name}, p.locate(s.AgentID, ""))
	for _, r := range rs {
		if r.block || r.stop {
			p.log.Warn(fmt.Sprintf("SubagentStart hook %q blocked, which the start of a subagent cannot be: %s", r.hook.command, r.reason+r.stopReason), "agent", s.AgentID)
		}
	}
	p.addContext(s.AgentID, rs, true)
	return nil
}

// subagent reports whether a is a subagent (tools.agent's child, whose
// session is made for its parent's). Claude Code runs SessionStart,
// UserPromptSubmit, Stop and SessionEnd for a person's session only; its
// subagents have SubagentStart and SubagentStop instead, which dsh does
// not run. So a Stop hook that keeps a turn going until the tests pass
// does not keep a subagent's going, and a UserPromptSubmit guard does
// not refuse the task a model gave. Tool hooks run for subagents' calls,
// as in Claude Code.
func subagent(a agents.Agent) bool {
	if a == nil {
		return false
	}
	s := a.Session()
	if s == nil {
		return false
	}
	_, child := session.ParentOf(s.ID())
	return child
}

// notify runs Notification when a person is asked whether a call may run,
// as Claude Code does when it shows a permission prompt: notification_type
// permission_prompt, which the matchers select, and a message naming the
// tool. It runs before the question reaches the person (keep it fast: a
// desktop notification). dsh sends no other notification types.
func (p *hooks) notify(ctx stdctx.Context, req approval.Request) error {
	msg := fmt.Sprintf("dsh needs your permission to use %s", claudeName(req.Tool))
	// The question waits for them: a hook that hangs must not keep it
	// from the person for its whole timeout.
	ctx, cancel := stdctx.WithTimeout(ctx, maxSessionEnd)
	defer cancel()
	rs := p.fire(ctx, Notification, "permission_prompt", input{Message: msg, NotificationType: "permission_prompt"}, p.locate(req.AgentID, ""))
	if ctx.Err() != nil {
		p.log.Warn(fmt.Sprintf("Notification hooks were stopped after %s, the most a question waits for them", maxSessionEnd), "agent", req.AgentID)
	}
	for _, r := range rs {
		if r.block || r.stop {
			p.log.Warn(fmt.Sprintf("Notification hook %q blocked, which a notification cannot be: %s", r.hook.command, r.reason+r.stopReason), "agent", req.AgentID)
		}
	}
	return nil
}

// precompact runs PreCompact before a compaction's summary request, as
// Claude Code runs it before it compacts: trigger is manual (a /compact,
// session.compact's Request) or auto, and the matchers select it. dsh's
// compaction takes no instructions, so custom_instructions is empty. A
// hook cannot stop the compaction; a block is logged.
func (p *hooks) precompact(ctx stdctx.Context, s compact.Started) error {
	if s.Agent == nil {
		return nil
	}
	trigger := "auto"
	if s.Manual {
		trigger = "manual"
	}
	none := ""
	rs := p.fire(ctx, PreCompact, trigger, input{Trigger: trigger, CustomInstructions: &none}, whereOf(s.Agent))
	for _, r := range rs {
		if r.block || r.stop {
			p.log.Warn(fmt.Sprintf("PreCompact hook %q blocked, which a compaction in dsh cannot be; it goes on: %s", r.hook.command, r.reason+r.stopReason), "agent", s.Agent.ID())
		}
	}
	return nil
}

// addContext keeps what hooks added for the agent's system prompt: to
// the SessionStart context when start is set, else to the prompts'.
func (p *hooks) addContext(agentID string, rs []reply, start bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.agent(agentID)
	list := &st.context
	if start {
		list = &st.start
	}
	for _, r := range rs {
		if c := strings.TrimSpace(r.context); c != "" {
			*list = append(*list, c)
		}
	}
	// The newest entries are kept within maxContext; SessionStart's came
	// first, so they go first.
	total := 0
	for _, l := range []*[]string{&st.context, &st.start} {
		for i := len(*l) - 1; i >= 0; i-- {
			total += len((*l)[i])
			if total > maxContext {
				*l = (*l)[i+1:]
				break
			}
		}
	}
}

// assemble adds the hooks' context to the agent's system prompt.
func (p *hooks) assemble(ctx stdctx.Context, a systemprompt.Assembly, next waterfall.Next[systemprompt.Assembly, string]) (string, error) {
	text, err := next.Call(ctx, a)
	if err != nil {
		return text, err
	}
	p.mu.Lock()
	var extra []string
	if st := p.state[a.AgentID]; st != nil {
		extra = append(append(extra, st.start...), st.context...)
	}
	p.mu.Unlock()
	if len(extra) == 0 {
		return text, nil
	}
	block := "Context from hooks:\n" + strings.Join(extra, "\n\n")
	if text == "" {
		return block, nil
	}
	return text + "\n\n" + block, nil
}

// lastWindow is how far back from the log's end lastAnswer looks: the
// answer a turn ends with is among the last few events.
const lastWindow = 64

// lastAnswer is the text of the agent's last assistant message, which
// Claude Code gives Stop hooks as last_assistant_message (a hook that
// checks the answer for "TODO" or a claim of passing tests reads it); nil
// when the log has none near its end.
func lastAnswer(a agents.Agent) *string {
	s := a.Session()
	if s == nil {
		return nil
	}
	evs := s.Events(int64(s.Len()) - lastWindow + 1)
	for i := len(evs) - 1; i >= 0; i-- {
		if e := evs[i]; e.Type == session.AssistantMessage && e.Message != nil {
			text := e.Message.Content
			return &text
		}
	}
	return nil
}
