package bash

import (
	"fmt"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/google/uuid"
)

// waker is the part of tools.bash that reports jobs' ends through the
// session service. It is a plugin of its own, mounted by tools.bash,
// because it injects the session service: bash itself runs in trees
// without one (tests, tools alone), where this part waits and ends
// report nowhere.
var waker = dshctx.Define("tools.bash/job-wake", func(ctx *dshctx.Context, w wakeWith) error {
	ctl, err := sessions.Key.Get(ctx)
	if err != nil {
		return err
	}
	w.m.setSessions(ctl)
	_, err = ctx.OnDispose("tools.bash job wake", func() error { w.m.setSessions(nil); return nil })
	return err
}, sessions.Key)

// wakeWith is the waker's config: the jobs it reports for.
type wakeWith struct{ m *jobManager }

func (m *jobManager) setSessions(ctl *sessions.Controller) {
	m.mu.Lock()
	m.sessions = ctl
	m.mu.Unlock()
}

// wakeTail bounds the output a job's end message quotes: the rest is
// there for job_output.
const wakeTail = 2000

// ended hands j's end to its agent when jobs.wake is on and nobody knows
// of it yet: not the model (it read the end, or killed the job), not a
// closing session.
func (m *jobManager) ended(j *job) {
	if m.cfg.Wake != WakeOn {
		return
	}
	j.mu.Lock()
	skip := j.seen || j.quiet
	j.mu.Unlock()
	m.mu.Lock()
	if skip || m.closed || m.agents[j.agentID] == nil {
		m.mu.Unlock()
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		m.wake(j)
	}()
}

// wake waits until j's session is idle, then, unless the model read the
// end meanwhile, prompts it through the session service, so admission
// judges the message like any other input; its source is the job's.
func (m *jobManager) wake(j *job) {
	m.mu.Lock()
	ctl := m.sessions
	m.mu.Unlock()
	if ctl == nil {
		// No session service (a tree without one): nobody to tell.
		return
	}
	var s *sessions.Session
	for _, x := range ctl.Sessions() {
		if x.AgentID() == j.agentID {
			s = x
			break
		}
	}
	if s == nil {
		return
	}
	if err := ctl.Idle(m.wakeCtx, s.ID()); err != nil {
		return
	}
	j.mu.Lock()
	if j.seen {
		j.mu.Unlock()
		return
	}
	j.seen = true
	text := j.endMessage()
	j.mu.Unlock()
	_, err := s.Prompt(m.wakeCtx, sessions.PromptRequest{RequestID: "job-end-" + uuid.NewString(), Content: text, Source: j.source})
	if err != nil && m.wakeCtx.Err() == nil {
		m.ctx.Logger().Warn("tools.bash: a job's end could not be reported to its agent", "agent", j.agentID, "job", j.id, "error", err)
	}
}

// endMessage is what the agent is told of j's end: its status and the
// last of its unread output, which counts as read when it is all there.
// j.mu is held.
func (j *job) endMessage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[background job %s ended: %s]\ncommand: %s\n", j.id, j.status, oneLine(j.command))
	unread := j.out.total - max(j.readOff, j.out.oldest())
	if unread <= 0 {
		b.WriteString("It wrote nothing you have not read.")
		return b.String()
	}
	from := max(j.readOff, j.out.total-wakeTail)
	data, _, _ := j.out.read(from, wakeTail, true)
	if from > j.readOff {
		fmt.Fprintf(&b, "The last %d of its %d unread bytes of output (job_output %s reads them all, from the first unread):\n", len(data), unread, j.id)
	} else {
		// All of it is in the message: job_output has nothing to repeat.
		b.WriteString("Its unread output:\n")
		j.readOff = j.out.total
	}
	b.WriteString(strings.ToValidUTF8(string(data), "\uFFFD"))
	return b.String()
}
