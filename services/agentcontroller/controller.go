// Package agentcontroller is the agentController service: the one way a
// message from outside — a person at the CLI, a schedule, a webhook, a
// plugin acting for someone — enters an agent's inbox.
//
// Deliver prepares the sender's content (Request.Prepare, then the
// agent-controller/prepare waterfall, where plugins may turn the input into
// other content: a prompt command into its file's text), builds the
// message, asks the agent-controller/admission waterfall for a decision —
// admission judges the prepared content and adds nothing the model sees —
// and, once admitted,
// inserts the message with nothing in between that could let the agent
// change. Deliveries to one agent run in arrival order on one chain, so a
// held message keeps later ones to the same agent waiting while other agents
// proceed. Messages the agent's own machinery produces do not pass here.
//
// A sender that cancels is answered at once with its context's cause, also
// while its own message is being decided: the decision then runs on aside
// and the agent's chain still waits for it, but its outcome is discarded
// and the message stays out. agent/inbox/inserted is emitted after the
// delivery left the chain, in insertion order, so its listeners may deliver
// to the same agent.
//
// A config reload that replaces admission plugins holds the stage (Hold):
// decisions in flight finish, new ones wait until the new listeners are in
// place, so no message passes with fewer listeners than the config asks
// for. Starting the new plugin before stopping the old one (Caddy's order)
// would need no pause, but admission plugins keep state — a rate limiter's
// counts, a session store's writer — and two instances side by side would
// count every message twice or write twice; a reload is rare and short, a
// pause of the deliveries is the cheaper price.
package agentcontroller

import (
	stdctx "context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/telemetry"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/holdgate"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/google/uuid"
)

func init() {
	// Message ids are made on every delivery; the pool spares a read of
	// the system's random source per id.
	uuid.EnableRandPool()
}

// Key is the service key.
var Key = dshctx.NewKey[*Controller]("agentController")

// Plugin provides the controller. It has no configuration.
var Plugin = dshctx.Define("agentController", func(ctx *dshctx.Context, _ dshctx.None) error {
	reg, err := agents.Key.Get(ctx)
	if err != nil {
		return err
	}
	c := &Controller{registry: reg, chains: map[string]*chain{}, emitting: map[string]emitQueue{}, accepted: map[acceptKey]llm.Message{}, refused: map[acceptKey]session.Event{}}
	c.stop, c.cancel = stdctx.WithCancel(stdctx.Background())
	// Registered first, so it runs last: by then the listeners below are
	// gone and every pending delivery has settled.
	if _, err := ctx.OnDispose("agent controller", func() error { c.shutdown(); return nil }); err != nil {
		return err
	}
	if _, err := session.EventAppended.On(ctx, c.onAppended); err != nil {
		return err
	}
	if _, err := agents.EventDisposed.On(ctx, c.onDisposed); err != nil {
		return err
	}
	return Key.Provide(ctx, c)
}, agents.Key)

// Controller is the agentController service.
type Controller struct {
	registry *agents.Registry
	gate     holdgate.Gate
	stop     stdctx.Context
	cancel   stdctx.CancelFunc
	pending  sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	// chains holds the deliveries of agents that have some in flight; an
	// agent with none has no entry.
	chains map[string]*chain
	// emitting holds the insertions of an agent whose inserted events are
	// not all emitted yet; an agent with none has no entry.
	emitting map[string]emitQueue
	// accepted maps request ids admitted into an inbox to their messages
	// until the session records them; from then on the session's own
	// index answers. The message, not its id alone: a retry is checked
	// against who sent it and what it said.
	accepted map[acceptKey]llm.Message
	// refused maps request ids whose messages never entered the inbox
	// to their message/refused, message/expired or (withdrawn by a
	// cancel) message/dropped event until the session records it, as
	// accepted does for admitted ones.
	refused map[acceptKey]session.Event
}

type acceptKey struct{ agent, request string }

// chain orders the deliveries to one agent.
type chain struct {
	queue []*delivery
	// withdrawals counts the Withdraw calls since the chain formed; a
	// delivery enqueued before the latest one is withdrawn.
	withdrawals uint64
	// withdrawnBy names who withdrew last (see agents.CancelledBy), and
	// cause is that cancel's error.
	withdrawnBy string
	cause       error
}

type delivery struct {
	// turn is closed when the delivery reaches the head of its chain.
	turn chan struct{}
	// abandoned marks a delivery whose sender gave up while it waited; it
	// is dropped when its turn comes. Guarded by Controller.mu.
	abandoned bool
	// gen is the chain's withdrawals when the delivery joined it.
	gen uint64
	// interrupt ends the context the delivery's listeners see; set while
	// it heads the chain, so a withdrawal stops a listener holding it.
	// Guarded by Controller.mu.
	interrupt stdctx.CancelCauseFunc
	// unhook stops c.stop from ending a cancellable sender's signal.
	unhook func() bool
}

// Deliver brings a message into agent's inbox through the admission stage
// and returns its id once it is there. See the package documentation for
// the order of events and Request for the sender's hooks.
func (c *Controller) Deliver(ctx stdctx.Context, agent agents.Agent, req Request) (string, error) {
	if agent == nil {
		return "", errs.New(errs.InvalidArgument, "Deliver: the agent is nil; resolve it from the agents service first")
	}
	if req.Mode != Followup && req.Mode != Steer {
		return "", errs.New(errs.InvalidArgument, fmt.Sprintf("Deliver: mode %q is neither %q nor %q", req.Mode, Followup, Steer))
	}
	if ctx == nil {
		ctx = stdctx.Background()
	}
	if ctx.Err() != nil {
		return "", stdctx.Cause(ctx)
	}
	if telemetry.Enabled() {
		return c.deliverTraced(ctx, agent, req)
	}
	return c.deliver(ctx, agent, req)
}

// deliver is Deliver past its checks.
func (c *Controller) deliver(ctx stdctx.Context, agent agents.Agent, req Request) (string, error) {
	d, head, err := c.enqueue(agent.ID())
	if err != nil {
		return "", err
	}
	if !head {
		select {
		case <-d.turn:
		case <-ctx.Done():
			c.abandon(agent.ID(), d)
			return "", stdctx.Cause(ctx)
		case <-c.stop.Done():
			c.abandon(agent.ID(), d)
			return "", stopped()
		}
	}
	var out outcome
	if ctx.Done() == nil {
		// A sender that cannot cancel has no reason to leave early: the
		// delivery runs on its goroutine.
		out = c.run(ctx, agent, req, nil, d)
		c.settle(agent.ID())
	} else {
		var stayed bool
		if out, stayed = c.runAside(ctx, agent, req, d); !stayed {
			return "", stdctx.Cause(ctx)
		}
	}
	if out.emit {
		c.emitInserted(out.event)
	}
	awaitRecord(ctx, agent, req.RequestID, out.err)
	return out.id, out.err
}

// outcome is what the head of a chain did with its delivery.
type outcome struct {
	id  string
	err error
	// emit says this delivery emits event, and then the ones queued behind
	// it; false when the message did not enter the inbox or another
	// goroutine emits its event. A value, not a pointer, so it costs no
	// allocation.
	emit  bool
	event Inserted
}

// attempt lets a sender that cancels leave while its delivery runs on.
// The delivery and the sender race for it once: the delivery to insert,
// the sender to leave; whoever loses accepts the other's outcome.
type attempt struct {
	state atomic.Int32
	done  chan struct{}
	out   outcome
}

const (
	attemptRunning int32 = iota
	attemptInserting
	attemptLeft
)

// runAside runs the head delivery on its own goroutine and waits for it
// or for the sender's cancellation, whichever comes first. ok is false
// when the sender left first; the delivery then still holds the chain
// until its listeners settle, and its outcome is discarded.
func (c *Controller) runAside(ctx stdctx.Context, agent agents.Agent, req Request, d *delivery) (out outcome, ok bool) {
	t := &attempt{done: make(chan struct{})}
	go func() {
		t.out = c.run(ctx, agent, req, t, d)
		c.settle(agent.ID())
		close(t.done)
	}()
	select {
	case <-t.done:
		return t.out, true
	case <-ctx.Done():
		if t.state.CompareAndSwap(attemptRunning, attemptLeft) {
			return outcome{}, false
		}
		// The delivery is inserting, which never waits: take its outcome.
		<-t.done
		return t.out, true
	}
}

// enqueue appends a delivery to the agent's chain; head says it may run now.
func (c *Controller) enqueue(agentID string) (*delivery, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, false, stopped()
	}
	ch := c.chains[agentID]
	if ch == nil {
		ch = &chain{}
		c.chains[agentID] = ch
	}
	d := &delivery{gen: ch.withdrawals}
	ch.queue = append(ch.queue, d)
	c.pending.Add(1)
	if len(ch.queue) == 1 {
		return d, true, nil
	}
	d.turn = make(chan struct{})
	return d, false, nil
}

// abandon marks a waiting delivery as given up; it keeps its place.
func (c *Controller) abandon(agentID string, d *delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-d.turn:
		// Its turn came as the sender gave up: pass the turn on now.
		c.advanceLocked(agentID)
	default:
		d.abandoned = true
	}
}

// settle removes the head delivery and hands the turn on.
func (c *Controller) settle(agentID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked(agentID)
}

// advanceLocked pops the head, drops abandoned deliveries behind it and
// wakes the next live one. The caller holds mu.
func (c *Controller) advanceLocked(agentID string) {
	ch := c.chains[agentID]
	ch.queue[0] = nil
	ch.queue = ch.queue[1:]
	c.pending.Done()
	for len(ch.queue) > 0 && ch.queue[0].abandoned {
		ch.queue[0] = nil
		ch.queue = ch.queue[1:]
		c.pending.Done()
	}
	if len(ch.queue) == 0 {
		delete(c.chains, agentID)
		return
	}
	close(ch.queue[0].turn)
}

// run does the delivery d once it heads its chain. t is set when the
// sender may leave before it finishes.
func (c *Controller) run(ctx stdctx.Context, agent agents.Agent, req Request, t *attempt, d *delivery) outcome {
	signal := c.signal(ctx, agent.ID(), d, req.spanless)
	defer c.release(d)
	if err := c.check(ctx, agent); err != nil {
		return outcome{err: err}
	}
	if req.RequestID != "" {
		// A retry learns the recorded outcome: a message that was
		// dropped, refused or expired is not decided a second time.
		if out, ok := c.recorded(agent, req); ok {
			return out
		}
	}
	if by, ok := c.withdrawn(agent.ID(), d); ok {
		// The record names its sender, as every other one does: a retry
		// is checked against it (sameRequest).
		m := llm.Message{ID: uuid.NewString(), Role: llm.RoleUser, Content: req.Content, RequestID: req.RequestID}
		if p := req.Source.Provenance(); !p.IsZero() {
			m.From = &p
		}
		return c.drop(signal, agent, m, by)
	}

	prepared := Prepared{Content: req.Content}
	if req.Prepare != nil {
		var err error
		if prepared, err = req.Prepare(signal); err != nil {
			return outcome{err: err}
		}
	}
	delivered := false
	defer func() {
		if !delivered && prepared.Release != nil {
			prepared.Release()
		}
	}()

	msg := llm.Message{ID: uuid.NewString(), Role: llm.RoleUser, Content: prepared.Content, Parts: prepared.Parts,
		RequestID: req.RequestID, Unattended: req.Source.IsUnattended()}
	if p := req.Source.Provenance(); !p.IsZero() {
		msg.From = &p
	}
	noteRewrite(&msg, req)
	// A reload replacing plugins holds the stages: preparation and the
	// decision wait until the configured listeners are all in place (a
	// command must not reach the model unexpanded, or be refused as
	// unknown, while its plugin is being swapped).
	if err := c.enter(signal); err != nil {
		if by, ok := c.withdrawn(agent.ID(), d); ok {
			// The withdrawal ended the wait (it cancels the signal of a
			// sender that can cancel): the message is the cancel's, not a
			// failure of the stage.
			return c.drop(signal, agent, msg, by)
		}
		c.recordFailure(signal, agent, msg, req, err)
		return outcome{err: c.recordRefusal(signal, agent, msg, err)}
	}
	msg, err := c.prepare(signal, agent, req, msg)
	noteRewrite(&msg, req)
	if by, ok := c.withdrawn(agent.ID(), d); ok {
		c.leave()
		return c.drop(signal, agent, msg, by)
	}
	if err != nil {
		c.leave()
		c.recordFailure(signal, agent, msg, req, err)
		return outcome{err: c.recordRefusal(signal, agent, msg, err)}
	}
	decision, err := c.decide(signal, agent, msg, req)
	c.leave()
	if by, ok := c.withdrawn(agent.ID(), d); ok {
		// A cancel came while the stage decided: whatever it decided,
		// the message is the cancel's. No decision is recorded — none
		// let anything through or turned anything away.
		return c.drop(signal, agent, msg, by)
	}
	switch {
	case err != nil:
		c.recordFailure(signal, agent, msg, req, err)
	case decision.Kind == DecisionAdmit:
		c.recordDecision(signal, agent, msg, req, VerdictAdmit, decision.Reason, decision.Policy, decision.PolicyVersion)
	case decision.Expired:
		c.recordDecision(signal, agent, msg, req, VerdictExpire, decision.Reason, decision.Policy, decision.PolicyVersion)
	default:
		c.recordDecision(signal, agent, msg, req, VerdictRefuse, decision.Reason, decision.Policy, decision.PolicyVersion)
	}
	if err == nil && decision.Kind == DecisionReject {
		// Recorded also when the sender left meanwhile: its retry learns
		// the refusal from the record.
		rej := AgentAdmissionRejected(decision.Reason, decision.Message, decision.Presented, nil)
		if decision.Expired {
			rej = expiredRefusal(decision.Reason, decision.Message, decision.Presented)
		}
		err = c.recordRefusal(signal, agent, msg, rej)
	}
	if ctx.Err() != nil {
		return outcome{err: stdctx.Cause(ctx)} // the sender's cancellation wins over any decision
	}
	if err != nil {
		return outcome{err: err}
	}
	if m := decision.admitted; m != nil {
		// Listeners may rewrite the content; the identity stays the
		// controller's.
		msg.Content, msg.Parts = m.Content, m.Parts
		noteRewrite(&msg, req)
	}

	if err := c.check(ctx, agent); err != nil {
		return outcome{err: err}
	}
	if t != nil && !t.state.CompareAndSwap(attemptRunning, attemptInserting) {
		// The sender left while the decision ran: it was told it was
		// cancelled, so the message stays out.
		return outcome{err: stdctx.Cause(ctx)}
	}
	// From here to the insertion nothing waits: the agent cannot change
	// between the check above and the insertion below except by a
	// concurrent dispose, which the inbox itself reports.
	if req.BeforeInsert != nil {
		if err := req.BeforeInsert(msg); err != nil {
			return outcome{err: err}
		}
	}
	// The last look for a withdrawal and the insertion happen under mu,
	// which Withdraw takes too: a cancel either withdraws the message
	// here or finds it in the inbox, which it empties after withdrawing.
	// Followup and Steer only queue and never call out, so holding mu
	// across them waits on nothing.
	c.mu.Lock()
	if by, ok := c.withdrawnLocked(agent.ID(), d); ok {
		c.mu.Unlock()
		return c.drop(signal, agent, msg, by)
	}
	// The turn that takes the message continues its trace.
	if !req.spanless {
		telemetry.Handoff(msg.ID, signal)
	}
	if req.Mode == Steer {
		err = agent.Steer(msg)
	} else {
		err = agent.Followup(msg)
	}
	if err != nil {
		c.mu.Unlock()
		if errs.HasCode(err, agents.AgentDisposed) {
			return outcome{err: agentGone(agent.ID())}
		}
		return outcome{err: err}
	}
	delivered = true
	in := Inserted{Agent: agent, Message: msg, Mode: req.Mode, Source: req.Source}
	out := outcome{id: msg.ID}
	if req.RequestID != "" {
		c.accepted[acceptKey{agent.ID(), req.RequestID}] = msg
	}
	// Decided while the delivery still heads the chain, so the events keep
	// the order of the insertions: the first emits, later ones queue.
	if q, busy := c.emitting[agent.ID()]; busy {
		q.pending = append(q.pending, in)
		c.emitting[agent.ID()] = q
	} else {
		c.emitting[agent.ID()] = emitQueue{}
		out.emit, out.event = true, in
	}
	c.mu.Unlock()
	return out
}

// signal returns the context admission sees for delivery d to agentID:
// it ends when the sender cancels or the controller stops and, for a
// sender that can cancel, when a cancel of the agent withdraws d. (A
// sender that cannot cancel pays for no context of its own: a listener
// holding its message finishes deciding, and the withdrawal then
// discards the decision.) release undoes it once d is decided.
func (c *Controller) signal(ctx stdctx.Context, agentID string, d *delivery, spanless bool) stdctx.Context {
	if ctx.Done() == nil {
		if spanless {
			return c.stop
		}
		return telemetry.Detach(c.stop, ctx)
	}
	sig, cancel := stdctx.WithCancelCause(ctx)
	d.unhook = stdctx.AfterFunc(c.stop, func() { cancel(nil) })
	c.mu.Lock()
	d.interrupt = cancel
	if ch := c.chains[agentID]; ch.withdrawals != d.gen {
		cancel(ch.cause)
	}
	c.mu.Unlock()
	return sig
}

// release ends the context signal gave d.
func (c *Controller) release(d *delivery) {
	if d.unhook == nil {
		return
	}
	d.unhook()
	c.mu.Lock()
	cancel := d.interrupt
	d.interrupt = nil
	c.mu.Unlock()
	cancel(nil)
}

// check fails when the sender gave up, the controller stopped or the agent
// left the registry.
func (c *Controller) check(ctx stdctx.Context, agent agents.Agent) error {
	if ctx.Err() != nil {
		return stdctx.Cause(ctx)
	}
	if c.stop.Err() != nil {
		return stopped()
	}
	if !c.registry.Has(agent) {
		return agentGone(agent.ID())
	}
	return nil
}

// prepare runs the prepare stage over msg's content. A refusal keeps its
// code, to be recorded; any other failure becomes one naming the stage.
func (c *Controller) prepare(signal stdctx.Context, agent agents.Agent, req Request, msg llm.Message) (llm.Message, error) {
	p, err := EventPrepare.Dispatch(signal, agent.Context(), Preparation{Agent: agent, Mode: req.Mode, Source: req.Source, Content: msg.Content, Parts: msg.Parts})
	if err == nil {
		msg.Content, msg.Parts = p.Content, p.Parts
		return msg, nil
	}
	if _, refused := RefusalOf(err); refused {
		return msg, err
	}
	if c.stop.Err() != nil {
		return msg, stopped()
	}
	if signal.Err() != nil {
		return msg, stdctx.Cause(signal)
	}
	return msg, AgentAdmissionRejected(ReasonAdmissionFailed,
		fmt.Sprintf("preparing the message for agent %q failed", agent.ID()), false, err)
}

// decide runs the admission stage and maps its failures.
func (c *Controller) decide(signal stdctx.Context, agent agents.Agent, msg llm.Message, req Request) (Decision, error) {
	d, err := EventAdmission.Dispatch(signal, agent.Context(), Admission{Agent: agent, Message: msg, Mode: req.Mode, Source: req.Source})
	if err == nil && d.Kind != DecisionAdmit && d.Kind != DecisionReject {
		err = errs.New(errs.InvalidArgument, fmt.Sprintf("an admission listener returned decision kind %q; use Admit() or Reject()", d.Kind))
	}
	if err == nil {
		return d, nil
	}
	// A listener that gave up because the sender cancelled or the
	// controller stopped is not a failing check: report why it gave up.
	if c.stop.Err() != nil {
		return Decision{}, stopped()
	}
	if signal.Err() != nil {
		return Decision{}, stdctx.Cause(signal)
	}
	return Decision{}, AgentAdmissionRejected(ReasonAdmissionFailed,
		fmt.Sprintf("the admission check for agent %q failed", agent.ID()), false, err)
}

// onAppended forgets accepted and refused request ids once the session
// records them.
func (c *Controller) onAppended(_ stdctx.Context, a session.Appended) error {
	if a.Event.RequestID == "" {
		return nil
	}
	key := acceptKey{a.Session.AgentID(), a.Event.RequestID}
	c.mu.Lock()
	delete(c.accepted, key)
	delete(c.refused, key)
	c.mu.Unlock()
	return nil
}

// onDisposed forgets what a disposed agent had accepted.
func (c *Controller) onDisposed(_ stdctx.Context, a agents.Agent) error {
	c.mu.Lock()
	for k := range c.accepted {
		if k.agent == a.ID() {
			delete(c.accepted, k)
		}
	}
	for k := range c.refused {
		if k.agent == a.ID() {
			delete(c.refused, k)
		}
	}
	c.mu.Unlock()
	return nil
}

// shutdown refuses new deliveries, rejects pending ones and waits until
// every one of them has settled.
func (c *Controller) shutdown() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	c.pending.Wait()
}
