// Package celpolicy is the policy.cel plugin: admission and approval rules
// written as CEL expressions (cel.dev/cel-go) over typed values — the
// message and its provenance at admission, the tool call and the
// provenance of its turn's inputs at approval — modelled on Kubernetes'
// ValidatingAdmissionPolicy: declarative rules with parameters, a failure
// policy (fail closed by default) and a message or message expression.
//
// Every rule is compiled and type checked when the config loads, so a
// rule naming a field that does not exist, or comparing a string with a
// number, is a `dsh config check` error at its file and line, never a
// surprise when a message arrives. The first rule whose when: holds
// decides: admit, hold or refuse a message; allow, deny or ask about a
// call. A message or call no rule matches passes on to the policies after
// this one.
//
// Rules may live in the config or in a file of their own (file:), which
// the plugin polls and reloads: a new version is compiled first and
// swapped in whole, atomically, so a message is always judged by one
// complete version; a version that does not compile is refused, logged,
// and the running one keeps deciding.
//
// Decisions name the policy ("policy.cel"), its version (a digest of the
// rules, params and failure policy) and the rule (reason policy/<name>),
// so the decision records say which rule of which version decided.
package celpolicy

import (
	stdctx "context"
	"fmt"
	"sync/atomic"
	"time"

	"cel.dev/cel-go/common/types"
	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// ID is the plugin's id, and the Policy its decisions name.
const ID = "policy.cel"

// Rule is one rule.
type Rule struct {
	// Name is the rule's name: its decisions' reason is policy/<name>.
	Name string `koanf:"name" json:"name" yaml:"name"`
	// When is a CEL expression of type bool: the rule applies when it is
	// true.
	When string `koanf:"when" json:"when" yaml:"when"`
	// Action is what the rule does: admit, hold or refuse at admission;
	// allow, deny or ask at approval.
	Action string `koanf:"action" json:"action" yaml:"action"`
	// Message tells the sender (a refusal) or the model and the person
	// asked (a denial, a question) why; MessageExpression is a CEL string
	// expression computing it instead.
	Message           string `koanf:"message" json:"message,omitempty" yaml:"message"`
	MessageExpression string `koanf:"message_expression" json:"message_expression,omitempty" yaml:"message_expression"`
	// MaxHold bounds how long a hold rule holds a message, re-evaluating
	// its when: every recheck, before it refuses it; default 1m.
	MaxHold time.Duration `koanf:"max_hold" json:"max_hold,omitempty" yaml:"max_hold"`
}

// Rules are a policy's rules and the params they read.
type Rules struct {
	Admission []Rule `koanf:"admission" json:"admission,omitempty" yaml:"admission"`
	Approval  []Rule `koanf:"approval" json:"approval,omitempty" yaml:"approval"`
	// Params are values the rules read as params.<key>: a list of owners,
	// the network tools, a path prefix.
	Params map[string]any `koanf:"params" json:"params,omitempty" yaml:"params"`
}

// Config is the plugin's configuration.
type Config struct {
	Admission []Rule         `koanf:"admission"`
	Approval  []Rule         `koanf:"approval"`
	Params    map[string]any `koanf:"params"`
	// FailurePolicy is what a rule that cannot be evaluated (a missing
	// argument, a division by zero) does: fail (the default) refuses
	// the message or denies the call; ignore skips the rule.
	FailurePolicy string `koanf:"failure_policy"`
	// File holds the rules (admission, approval, params) instead of the
	// config, as YAML; it is polled every ReloadInterval (default 2s) and
	// reloaded when it changes. Relative to the working directory.
	File           string        `koanf:"file"`
	ReloadInterval time.Duration `koanf:"reload_interval"`
	// Recheck is how often a held message's rule is evaluated again;
	// default 1s.
	Recheck time.Duration `koanf:"recheck"`
}

// Validate compiles and type checks the rules, so a config with a rule
// that would not run does not load.
func (c Config) Validate() error {
	_, err := c.load()
	return err
}

// load compiles the configured rules: the config's, or the file's.
func (c Config) load() (*ruleSet, error) {
	if c.ReloadInterval < 0 || c.Recheck < 0 {
		return nil, errs.New(errs.InvalidArgument, "policy.cel: reload_interval and recheck cannot be negative; leave them out for the defaults (2s, 1s)")
	}
	if c.File != "" {
		if len(c.Admission)+len(c.Approval) > 0 || c.Params != nil {
			return nil, &pathError{path: "file", err: fmt.Errorf("the rules are in file %s, and the config has rules or params too; keep them in one place", c.File)}
		}
		rs, _, err := loadFile(c.File, c.FailurePolicy)
		if err != nil {
			return nil, errs.Wrap(errs.InvalidArgument, err, "policy.cel")
		}
		return rs, nil
	}
	rs, err := compile(Rules{Admission: c.Admission, Approval: c.Approval, Params: c.Params}, c.FailurePolicy, "the config", nil)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// ruleName is what a rule may be called.
var ruleName = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Policy is one mounted policy.cel.
type Policy struct {
	rules   atomic.Pointer[ruleSet]
	recheck time.Duration
	log     hclog.Logger
	now     func() time.Time
}

// New compiles cfg into a policy (without its file watch).
func New(cfg Config, log hclog.Logger) (*Policy, error) {
	rs, err := cfg.load()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	p := &Policy{recheck: cfg.Recheck, log: log, now: time.Now}
	if p.recheck == 0 {
		p.recheck = defaultRecheck
	}
	p.rules.Store(rs)
	return p, nil
}

// Version is the digest of the rules deciding now.
func (p *Policy) Version() string { return p.rules.Load().version }

// Plugin is policy.cel.
var Plugin = plugin.Register(ID, "admission and approval rules as CEL expressions over the message, the call and who is behind them", func(ctx *dshctx.Context, cfg Config) error {
	p, err := New(cfg, ctx.Logger())
	if err != nil {
		return err
	}
	if err := p.Mount(ctx); err != nil {
		return err
	}
	if cfg.File != "" {
		every := cfg.ReloadInterval
		if every == 0 {
			every = 2 * time.Second
		}
		_, err = ctx.Effect("policy.cel file watch", func() (dshctx.Disposer, error) {
			stop := p.watch(cfg.File, cfg.FailurePolicy, every)
			return func() error { stop(); return nil }, nil
		})
	}
	return err
})

// Mount registers the policy's listeners in ctx.
func (p *Policy) Mount(ctx *dshctx.Context) error {
	if _, err := agentcontroller.EventAdmission.On(ctx, p.admit); err != nil {
		return err
	}
	_, err := tools.EventApprove.On(ctx, p.approve)
	return err
}

// reason is the reason a rule's decisions give.
func reason(r *rule) string { return "policy/" + r.Name }

// admit is the admission listener.
func (p *Policy) admit(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
	rs := p.rules.Load()
	if len(rs.admission) == 0 {
		return next.Call(ctx, a)
	}
	act := activations.Get().(*activation)
	defer act.release()
	act.request, act.source, act.params = requestOf(a), sourceOfAdmission(a.Source), rs.params
	var held time.Duration
	for {
		if rs.usesNow {
			act.now = p.now()
		}
		r, msg, err := rs.first(rs.firstAdmission, rs.admission, act)
		switch {
		case err != nil:
			return p.refuse(rs, r, fmt.Sprintf("admission rule %q could not be evaluated (%v), and the policy fails closed", r.Name, err)), nil
		case r == nil || r.Action == "admit":
			return next.Call(ctx, a)
		case r.Action == "refuse":
			return p.refuse(rs, r, msg), nil
		}
		// hold: wait, then judge again — by the version running then.
		limit := r.MaxHold
		if limit == 0 {
			limit = defaultMaxHold
		}
		if held >= limit {
			return p.refuse(rs, r, fmt.Sprintf("%s (held for %s, and the rule still holds it)", msg, held)), nil
		}
		t := time.NewTimer(p.recheck)
		select {
		case <-ctx.Done():
			t.Stop()
			return agentcontroller.Decision{}, ctx.Err()
		case <-t.C:
		}
		held += p.recheck
		rs = p.rules.Load()
		act.params = rs.params
	}
}

func (p *Policy) refuse(rs *ruleSet, r *rule, msg string) agentcontroller.Decision {
	d := agentcontroller.Reject(reason(r), msg, false)
	d.Policy, d.PolicyVersion = ID, rs.version
	return d
}

// approve is the approval listener. A deny decides at once; an allow or
// an ask hears the policies after this one first, and their deny stands.
func (p *Policy) approve(ctx stdctx.Context, ap tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
	rs := p.rules.Load()
	if len(rs.approval) == 0 {
		return next.Call(ctx, ap)
	}
	act := activations.Get().(*activation)
	defer act.release()
	act.call, act.params, act.now = callOf(ap.Call), rs.params, p.now()
	for _, s := range ap.Call.Sources {
		act.sources = append(act.sources, sourceOfProvenance(s, ap.Call.Unattended))
	}
	if len(act.sources) > 0 {
		act.source = act.sources[0]
	} else {
		act.source.Unattended = ap.Call.Unattended
	}
	r, msg, err := rs.first(rs.firstApproval, rs.approval, act)
	v := tools.Verdict{Source: ID, PolicyVersion: rs.version}
	switch {
	case err != nil:
		v.Decision, v.Reason = tools.Deny, fmt.Sprintf("%s: approval rule %q could not be evaluated (%v), and the policy fails closed", reason(r), r.Name, err)
		return v, nil
	case r == nil:
		return next.Call(ctx, ap)
	case r.Action == "deny":
		v.Decision, v.Reason = tools.Deny, reason(r)+": "+msg
		return v, nil
	}
	after, err := next.Call(ctx, ap)
	if err != nil {
		return after, err
	}
	if after.Decision == tools.Deny && after.Source != "" {
		return after, nil
	}
	v.Decision, v.Reason, v.Arguments = tools.Decision(r.Action), reason(r)+": "+msg, after.Arguments
	return v, nil
}

// first returns the first rule of list whose when: holds, and its
// message; with the fail policy, a rule whose evaluation fails is
// returned with the error, else it is skipped (and logged).
func (rs *ruleSet) first(all *stage, list []rule, act *activation) (*rule, string, error) {
	if all != nil {
		// An error from any falls through to which, and from it to the
		// rule-by-rule loop, which tells what failed.
		if out, _, err := all.any.Eval(act); err == nil && out == types.False {
			return nil, "", nil
		}
		if out, _, err := all.which.Eval(act); err == nil {
			// types.Int, not Value(): boxing -1 as an int64 allocates.
			if i, ok := out.(types.Int); ok {
				if i < 0 || int(i) >= len(list) {
					return nil, "", nil
				}
				return &list[i], list[i].text(act), nil
			}
		}
	}
	for i := range list {
		r := &list[i]
		out, _, err := r.when.Eval(act)
		if err == nil {
			hit, ok := out.Value().(bool)
			if !ok {
				err = fmt.Errorf("when: is %v, not a bool", out)
			} else if !hit {
				continue
			}
		}
		if err != nil {
			if rs.fail {
				return r, "", err
			}
			continue
		}
		return r, r.text(act), nil
	}
	return nil, "", nil
}

// text is the rule's message for act.
func (r *rule) text(act *activation) string {
	if r.message != nil {
		out, _, err := r.message.Eval(act)
		if s, ok := out.Value().(string); err == nil && ok && s != "" {
			return s
		}
		if err != nil {
			return fmt.Sprintf("rule %q applies (its message_expression failed: %v)", r.Name, err)
		}
	}
	if r.Message != "" {
		return r.Message
	}
	return fmt.Sprintf("policy.cel rule %q applies", r.Name)
}
