// Package budget is the admission.budget plugin: ceilings on tokens, cost, prompts
// and concurrent turns per principal, tenant, agent and session, checked
// at admission and inside a turn.
//
// At admission (agent-controller/admission) a prompt is refused when a
// limit it falls under has spent its tokens or cost, or sent its prompts
// for the window; it is held, up to hold, while its concurrent-turns
// slots are taken. Every refusal is a Decision with Policy "budget" and
// Reason "budget/<what ran out>". Inside a turn (agent/stop) the counters
// are read again before each model request and after each answer: a
// budget that ran out mid-turn ends the turn with reason "budget", the
// step's tool calls answered as not executed.
//
// A subagent's turns are charged to what its parent's turn is charged to
// (the parent's principal, tenant, agent and session, up to the root of
// the tree), so a tree of agents spends one budget, and a budget that runs
// out stops the child and then the parent.
//
// Counters live in a store: memory (this process) or a JetStream
// key-value bucket shared by every host of a cluster, written by
// compare-and-set.
package budget

import (
	stdctx "context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/usage"
	"github.com/hashicorp/go-hclog"
)

// Policy names the plugin in its decisions (Decision.Policy).
const Policy = "budget"

// Reasons of the plugin's refusals and stops: "budget/" and what ran out.
const (
	ReasonTokens      = "budget/tokens"
	ReasonCost        = "budget/cost"
	ReasonPrompts     = "budget/prompts"
	ReasonConcurrent  = "budget/concurrent-turns"
	ReasonUnavailable = "budget/store-unavailable"
)

// Plugin is the budget plugin.
var Plugin = plugin.Register("admission.budget", "ceilings on tokens, cost, prompts and concurrent turns per principal, tenant, agent and session, at admission and inside a turn", func(ctx *dshctx.Context, cfg Config) error {
	b, err := New(cfg, ctx.Logger())
	if err != nil {
		return err
	}
	if _, err := ctx.OnDispose("release the budget's slots and close its store", func() error { b.Close(); return nil }); err != nil {
		b.Close()
		return err
	}
	return b.Mount(ctx)
})

// Budget is the plugin's state on one host.
type Budget struct {
	cfg     Config
	version string
	st      store
	log     hclog.Logger
	now     func() time.Time
	// poll is how often a held prompt looks for a slot another host freed;
	// slots freed here wake it at once.
	poll time.Duration
	// slotLimits says some limit has concurrent_turns.
	slotLimits bool

	mu     sync.Mutex
	agents map[string]*agentState // by agent id
	freed  chan struct{}          // closed and replaced when a slot is freed here
	warned map[string]bool        // unpriced models warned about
}

// agentState is what the plugin knows of one agent: the prompts it
// admitted that are not done, and whom its running turn is charged to.
type agentState struct {
	id, session string
	turnNo      int
	turn        []subjects
	// last is whom the latest prompt admitted was charged to: a turn
	// whose prompts are not known here (resumed, or pruned) is charged
	// to it.
	last    []subjects
	pending map[string]*pending // by message id
}

// maxUntracked bounds the prompts without slots an agent keeps track of
// while they wait for their turn: past it, the oldest are forgotten and
// their turn is charged to the latest prompt's subjects.
const maxUntracked = 1024

// pending is a prompt admitted and not done: the slots it holds are freed
// when the turn that ran it ends, or when it is dropped.
type pending struct {
	msg   string
	subj  []subjects // one; a subagent's task: its parent turn's
	slots []string
	turn  int
}

// subjects are who a prompt is charged to; "" where none applies (a
// prompt without a tenant counts against no tenant limit).
type subjects struct{ principal, tenant, agent, session string }

func (s subjects) of(p Per) string {
	switch p {
	case PerPrincipal:
		return s.principal
	case PerTenant:
		return s.tenant
	case PerAgent:
		return s.agent
	}
	return s.session
}

// New returns the plugin's state for cfg, its store opened.
func New(cfg Config, log hclog.Logger) (*Budget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	b := &Budget{cfg: cfg, version: cfg.version(), log: log, now: time.Now, poll: 100 * time.Millisecond,
		agents: map[string]*agentState{}, freed: make(chan struct{}), warned: map[string]bool{}}
	for _, l := range cfg.Limits {
		b.slotLimits = b.slotLimits || l.ConcurrentTurns > 0
	}
	if cfg.Store == StoreNATS {
		kv, err := openKV(cfg.NATS)
		if err != nil {
			return nil, err
		}
		b.st = kv
	} else {
		b.st = newMemStore()
	}
	return b, nil
}

// Mount registers the plugin's listeners in ctx.
func (b *Budget) Mount(ctx *dshctx.Context) error {
	if _, err := agentcontroller.EventAdmission.On(ctx, b.admit); err != nil {
		return err
	}
	if _, err := agentloop.EventStop.On(ctx, b.stop); err != nil {
		return err
	}
	if _, err := session.EventAppended.On(ctx, func(_ stdctx.Context, a session.Appended) error {
		b.appended(a.Session.AgentID(), a.Session.ID(), a.Event)
		return nil
	}); err != nil {
		return err
	}
	_, err := agents.EventDisposed.On(ctx, func(_ stdctx.Context, a agents.Agent) error {
		b.forget(a.ID())
		return nil
	})
	return err
}

// Close frees the slots this host's prompts hold and closes the store.
func (b *Budget) Close() {
	b.mu.Lock()
	var ids []string
	for id := range b.agents {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	for _, id := range ids {
		b.forget(id)
	}
	b.st.close()
}

// Version is the digest of the limits and prices the plugin decides by.
func (b *Budget) Version() string { return b.version }

// agentName is the agent's configured name: an agent id is name@session.
func agentName(id string) string {
	if i := strings.IndexByte(id, '@'); i > 0 {
		return id[:i]
	}
	return id
}

// rootSession is the session at the root of id's subagent tree.
func rootSession(id string) string {
	for {
		p, ok := session.ParentOf(id)
		if !ok {
			return id
		}
		id = p
	}
}

func sessionOf(a agents.Agent) string {
	if s := a.Session(); s != nil {
		return s.ID()
	}
	return a.ID()
}

// stateLocked returns the state of agent a, made when missing.
func (b *Budget) stateLocked(id, sess string) *agentState {
	st := b.agents[id]
	if st == nil {
		st = &agentState{id: id, session: sess, pending: map[string]*pending{}}
		b.agents[id] = st
	}
	return st
}

// subjectsOf says whom a prompt is charged to, and whether it is a
// subagent's task charged to its parent's turn (to each of the subjects
// that turn is charged to).
func (b *Budget) subjectsOf(a agentcontroller.Admission) ([]subjects, bool) {
	sess := sessionOf(a.Agent)
	if a.Source.Kind == agentcontroller.SourceSubagent {
		if parent, ok := session.ParentOf(sess); ok {
			b.mu.Lock()
			var subj []subjects
			for _, st := range b.agents {
				if st.session == parent {
					subj = slices.Clone(st.turn)
					break
				}
			}
			b.mu.Unlock()
			if len(subj) > 0 {
				return subj, true
			}
		}
	}
	p := a.Source.Principal
	if a.Source.Kind == agentcontroller.SourceSubagent && a.Source.OnBehalfOf != nil {
		p = *a.Source.OnBehalfOf
	}
	return []subjects{{principal: p.String(), tenant: p.Tenant, agent: agentName(a.Agent.ID()), session: rootSession(sess)}}, a.Source.Kind == agentcontroller.SourceSubagent
}

// key names one counter in the store: limit, what it counts per, whom,
// and what.
func key(l Limit, who, what string) string {
	var sb strings.Builder
	sb.Grow(len(l.Name) + len(l.Per) + 2*len(who) + len(what) + 4)
	sb.WriteString(l.Name)
	sb.WriteByte('.')
	sb.WriteString(string(l.Per))
	sb.WriteByte('.')
	encode(&sb, who)
	sb.WriteByte('.')
	sb.WriteString(what)
	return sb.String()
}

// encode writes a subject as a key token: "n" and the subject when it is
// letters, digits, '_' and '-' only, else "x" and its bytes in hex.
func encode(sb *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			sb.WriteByte('x')
			sb.WriteString(hex.EncodeToString([]byte(s)))
			return
		}
	}
	sb.WriteByte('n')
	sb.WriteString(s)
}

// windowOf is the start of the window now falls in (Unix seconds), 0 for
// a limit without one, and when it ends.
func windowOf(l Limit, now time.Time) (int64, time.Time) {
	if l.Window <= 0 {
		return 0, time.Time{}
	}
	start := now.Truncate(l.Window)
	return start.Unix(), start.Add(l.Window)
}

// charge adds a step's usage to the counters of the turn's subjects.
func (b *Budget) charge(subj []subjects, e session.Event) {
	if e.Usage == nil {
		return
	}
	u := usage.Normalize(*e.Usage)
	tokens := float64(u.InputTokens + u.OutputTokens)
	cost, priced := 0.0, false
	if pr, ok := b.cfg.pricing.Lookup(e.Provider, e.Model); ok {
		cost, priced = pr.Cost(u), true
	}
	now := b.now()
	done := map[string]bool{}
	for _, l := range b.cfg.Limits {
		if l.Tokens == 0 && l.Cost == 0 {
			continue
		}
		w, _ := windowOf(l, now)
		for _, s := range subj {
			who := s.of(l.Per)
			if who == "" {
				continue
			}
			add := func(what string, v float64) {
				k := key(l, who, what)
				if done[k] || v == 0 {
					return
				}
				done[k] = true
				ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
				defer cancel()
				err := b.st.update(ctx, k, func(old value) (value, bool, error) {
					return value{W: w, V: old.amount(w) + v}, true, nil
				})
				if err != nil {
					b.log.Warn("a step's usage could not be counted", "counter", k, "error", err)
				}
			}
			if l.Tokens > 0 {
				add("tokens", tokens)
			}
			if l.Cost > 0 {
				if !priced {
					b.warnUnpriced(e.Provider, e.Model)
				}
				add("cost", cost)
			}
		}
	}
}

func (b *Budget) warnUnpriced(provider, model string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.warned[provider+"/"+model] {
		return
	}
	b.warned[provider+"/"+model] = true
	b.log.Warn("a model without a price in pricing: does not count against cost limits; price it", "provider", provider, "model", model)
}

// ranOut is a limit found spent.
type ranOut struct {
	reason, message string
}

// spent returns the first tokens or cost limit of subj that is spent.
func (b *Budget) spent(ctx stdctx.Context, subj []subjects) (*ranOut, error) {
	now := b.now()
	for _, l := range b.cfg.Limits {
		if l.Tokens == 0 && l.Cost == 0 {
			continue
		}
		w, end := windowOf(l, now)
		for _, s := range subj {
			who := s.of(l.Per)
			if who == "" {
				continue
			}
			if l.Tokens > 0 {
				v, err := b.st.get(ctx, key(l, who, "tokens"))
				if err != nil {
					return nil, err
				}
				if used := v.amount(w); used >= float64(l.Tokens) {
					return &ranOut{ReasonTokens, fmt.Sprintf("%s has used %.0f of its %d tokens%s; %s, or raise tokens of limit %q in the budget plugin's config",
						describe(l, who), used, l.Tokens, during(l), wait(l, end), l.Name)}, nil
				}
			}
			if l.Cost > 0 {
				v, err := b.st.get(ctx, key(l, who, "cost"))
				if err != nil {
					return nil, err
				}
				cur := b.cfg.pricing.CurrencyName()
				if used := v.amount(w); used >= l.Cost {
					return &ranOut{ReasonCost, fmt.Sprintf("%s has spent %.4f of its %g %s%s; %s, or raise cost of limit %q in the budget plugin's config",
						describe(l, who), used, l.Cost, cur, during(l), wait(l, end), l.Name)}, nil
				}
			}
		}
	}
	return nil, nil
}

// describe names a limit's subject: `budget "daily": principal "user:ann"`.
func describe(l Limit, who string) string {
	return fmt.Sprintf("budget %q: %s %q", l.Name, l.Per, who)
}

func during(l Limit) string {
	if l.Window <= 0 {
		return ""
	}
	return fmt.Sprintf(" in the current %s window", l.Window)
}

func wait(l Limit, end time.Time) string {
	if l.Window <= 0 {
		return "it does not reset"
	}
	return fmt.Sprintf("it resets at %s", end.UTC().Format(time.RFC3339))
}

func (b *Budget) refuse(reason, message string, expired bool) agentcontroller.Decision {
	d := agentcontroller.Reject(reason, message, false)
	d.Expired = expired
	d.Policy, d.PolicyVersion = Policy, b.version
	return d
}

// admit is the admission listener.
func (b *Budget) admit(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
	subj, child := b.subjectsOf(a)
	out, err := b.spent(ctx, subj)
	if err != nil {
		return b.unavailable(err), nil
	}
	if out != nil {
		return b.refuse(out.reason, out.message, false), nil
	}
	p := &pending{msg: a.Message.ID, subj: subj}
	var prompts []counted
	rollback := func() {
		for _, k := range p.slots {
			b.release(k, p.msg)
		}
		for _, c := range prompts {
			b.uncount(c)
		}
	}
	// A subagent's task runs inside its parent's turn, which already
	// counted as a prompt and holds a slot: taking another for the child
	// would wait for the one the parent holds.
	if !child {
		if d, ok, err := b.takePrompts(ctx, subj[0], &prompts); err != nil {
			rollback()
			return b.unavailable(err), nil
		} else if !ok {
			rollback()
			return d, nil
		}
		if d, ok, err := b.takeSlots(ctx, a, subj[0], p); err != nil {
			rollback()
			if ctx.Err() != nil {
				return agentcontroller.Decision{}, err
			}
			return b.unavailable(err), nil
		} else if !ok {
			rollback()
			return d, nil
		}
	}
	// Known before the message can reach a turn: the loop may take it as
	// soon as next returns.
	st := b.track(a, p)
	// Deferred, because a panic further down the chain unwinds this
	// listener instead of returning an error from next.
	admitted := false
	defer func() {
		if !admitted {
			b.mu.Lock()
			delete(st.pending, a.Message.ID)
			b.mu.Unlock()
			rollback()
		}
	}()
	d, err := next.Call(ctx, a)
	admitted = err == nil && d.Kind == agentcontroller.DecisionAdmit
	return d, err
}

func (b *Budget) track(a agentcontroller.Admission, p *pending) *agentState {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stateLocked(a.Agent.ID(), sessionOf(a.Agent))
	if len(st.pending) >= maxUntracked {
		for id, q := range st.pending {
			if len(q.slots) == 0 {
				delete(st.pending, id)
			}
		}
	}
	st.pending[a.Message.ID] = p
	st.last = p.subj
	return st
}

func (b *Budget) unavailable(err error) agentcontroller.Decision {
	return b.refuse(ReasonUnavailable, fmt.Sprintf("the budget's counters cannot be read or written, so the prompt is refused until they can: %v", err), false)
}

// takePrompts counts the prompt against every prompts limit of subj; a
// limit whose window is full refuses it.
func (b *Budget) takePrompts(ctx stdctx.Context, subj subjects, taken *[]counted) (agentcontroller.Decision, bool, error) {
	now := b.now()
	for _, l := range b.cfg.Limits {
		who := subj.of(l.Per)
		if l.Prompts == 0 || who == "" {
			continue
		}
		w, end := windowOf(l, now)
		k := key(l, who, "prompts")
		took := false
		err := b.st.update(ctx, k, func(old value) (value, bool, error) {
			took = false
			v := old.amount(w)
			if v+1 > float64(l.Prompts) {
				return value{}, false, nil
			}
			took = true
			return value{W: w, V: v + 1}, true, nil
		})
		if err != nil {
			return agentcontroller.Decision{}, false, err
		}
		if !took {
			return b.refuse(ReasonPrompts, fmt.Sprintf("%s has sent its %d prompts of the current %s window; it resets at %s (in %s): send it again then, or raise prompts of limit %q in the budget plugin's config",
				describe(l, who), l.Prompts, l.Window, end.UTC().Format(time.RFC3339), end.Sub(now).Round(time.Second), l.Name), false), false, nil
		}
		*taken = append(*taken, counted{k, w})
	}
	return agentcontroller.Decision{}, true, nil
}

// counted is a prompt counted in counter key of the window w.
type counted struct {
	key string
	w   int64
}

// uncount takes back a prompt counted for a delivery that was refused.
func (b *Budget) uncount(c counted) {
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	err := b.st.update(ctx, c.key, func(old value) (value, bool, error) {
		if v := old.amount(c.w); v >= 1 {
			return value{W: c.w, V: v - 1}, true, nil
		}
		return value{}, false, nil
	})
	if err != nil {
		b.log.Warn("a refused prompt could not be uncounted", "counter", c.key, "error", err)
	}
}

// takeSlots takes a concurrent-turns slot of every such limit of subj,
// holding the prompt while one is full.
func (b *Budget) takeSlots(ctx stdctx.Context, a agentcontroller.Admission, subj subjects, p *pending) (agentcontroller.Decision, bool, error) {
	if !b.slotLimits {
		return agentcontroller.Decision{}, true, nil
	}
	hold := b.cfg.Hold
	if a.Source.IsUnattended() {
		hold = b.cfg.UnattendedHold
	}
	var deadline <-chan time.Time // made when a prompt first waits
	id := a.Message.ID
	for _, l := range b.cfg.Limits {
		who := subj.of(l.Per)
		if l.ConcurrentTurns == 0 || who == "" {
			continue
		}
		k := key(l, who, "turns")
		for {
			b.mu.Lock()
			freed := b.freed
			b.mu.Unlock()
			took := false
			err := b.st.update(ctx, k, func(old value) (value, bool, error) {
				now := b.now()
				s := old.live(now)
				took = false
				if int64(len(s)) >= l.ConcurrentTurns {
					return value{}, false, nil
				}
				took = true
				return value{S: append(s, slot{ID: id, Until: now.Add(b.cfg.SlotTTL).Unix()})}, true, nil
			})
			if err != nil {
				return agentcontroller.Decision{}, false, err
			}
			if took {
				p.slots = append(p.slots, k)
				break
			}
			msg := fmt.Sprintf("%s already has %d prompts admitted and not done (the limit is %d)", describe(l, who), l.ConcurrentTurns, l.ConcurrentTurns)
			if hold <= 0 {
				return b.refuse(ReasonConcurrent, msg+"; send it again once one is done, or raise concurrent_turns of limit "+fmt.Sprintf("%q", l.Name), false), false, nil
			}
			if deadline == nil {
				t := time.NewTimer(hold)
				defer t.Stop()
				deadline = t.C
			}
			select {
			case <-freed:
			case <-time.After(b.poll):
			case <-deadline:
				return b.refuse(ReasonConcurrent, fmt.Sprintf("%s, and none was done within %s; send it again under a new request id", msg, hold), true), false, nil
			case <-ctx.Done():
				return agentcontroller.Decision{}, false, ctx.Err()
			}
		}
	}
	return agentcontroller.Decision{}, true, nil
}

// release frees the slot id of counter k, and wakes the prompts held here.
func (b *Budget) release(k, id string) {
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	err := b.st.update(ctx, k, func(old value) (value, bool, error) {
		s := old.live(b.now())
		n := len(s)
		s = slices.DeleteFunc(s, func(x slot) bool { return x.ID == id })
		return value{S: s}, len(s) != n, nil
	})
	if err != nil {
		b.log.Warn("a turn slot could not be freed; it frees itself after slot_ttl", "counter", k, "error", err)
	}
	b.mu.Lock()
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// appended follows an agent's log: which prompts a turn runs, when it
// ends, and what its steps used.
func (b *Budget) appended(agentID, sess string, e session.Event) {
	var free []*pending
	var charge []subjects
	b.mu.Lock()
	st := b.agents[agentID]
	if st == nil {
		if !usage.Counted(e) {
			b.mu.Unlock()
			return
		}
		// An agent that had no prompt admitted here (resumed with one
		// queued, say) still pays for its steps.
		st = b.stateLocked(agentID, sess)
	}
	switch e.Type {
	case session.TurnStart:
		st.turnNo, st.turn = e.Turn, nil
	case session.UserMessage, session.SteeringMessage:
		if e.Message != nil {
			if p := st.pending[e.Message.ID]; p != nil {
				p.turn = e.Turn
				for _, s := range p.subj {
					st.addTurn(s)
				}
				if len(p.slots) == 0 {
					delete(st.pending, e.Message.ID) // nothing to free
				}
			}
		}
	case session.MessageDropped:
		if e.Message != nil {
			if p := st.pending[e.Message.ID]; p != nil {
				delete(st.pending, e.Message.ID)
				free = append(free, p)
			}
		}
	case session.TurnEnd:
		for id, p := range st.pending {
			if p.turn == e.Turn {
				delete(st.pending, id)
				free = append(free, p)
			}
		}
	case session.AssistantMessage, session.Compacted:
		charge = st.turn
		switch {
		case len(charge) > 0:
		case st.last != nil:
			charge = st.last
		default:
			charge = []subjects{{agent: agentName(agentID), session: rootSession(st.session)}}
		}
	}
	b.mu.Unlock()
	for _, p := range free {
		for _, k := range p.slots {
			b.release(k, p.msg)
		}
	}
	if charge != nil {
		b.charge(charge, e)
	}
}

func (st *agentState) addTurn(s subjects) {
	for _, t := range st.turn {
		if t == s {
			return
		}
	}
	st.turn = append(st.turn, s)
}

// forget frees what a disposed agent's prompts held.
func (b *Budget) forget(agentID string) {
	b.mu.Lock()
	st := b.agents[agentID]
	delete(b.agents, agentID)
	b.mu.Unlock()
	if st == nil {
		return
	}
	for _, p := range st.pending {
		for _, k := range p.slots {
			b.release(k, p.msg)
		}
	}
}

// stop is the agent/stop listener: a turn whose budget ran out ends.
func (b *Budget) stop(ctx stdctx.Context, c agentloop.StopCheck, next agentloop.StopNext) (agentloop.Stop, error) {
	b.mu.Lock()
	var subj []subjects
	if st := b.agents[c.Agent.ID()]; st != nil {
		subj = append(subj, st.turn...)
	}
	b.mu.Unlock()
	if len(subj) > 0 {
		out, err := b.spent(ctx, subj)
		if err != nil {
			// The prompt was admitted with the counters readable: a store
			// that stops answering mid-turn does not kill the work.
			b.log.Warn("the budget's counters cannot be read; the turn goes on", "agent", c.Agent.ID(), "error", err)
		} else if out != nil {
			return agentloop.Stop{Reason: agentloop.ReasonBudget, Message: out.reason + ": " + out.message}, nil
		}
	}
	return next.Call(ctx, c)
}
