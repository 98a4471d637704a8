package permission

import (
	stdctx "context"
	"fmt"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/services/tools"
)

// policy is a compiled Config.
type policy struct {
	source string // "tools.permission", or "tools.permission@agent" in a preset
	mode   Mode
	rules  []rule // deny list, allow-list exclusion, rules, allow list
}

func newPolicy(cfg Config, source string) (*policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &policy{source: source, mode: cfg.Mode}
	for i, n := range cfg.Deny {
		re, _ := toolGlob(n)
		p.rules = append(p.rules, rule{where: fmt.Sprintf("deny[%d]", i), tool: re, decision: tools.Deny,
			reason: "the deny list of this agent's tools.permission names it"})
	}
	if len(cfg.Allow) > 0 {
		out := rule{where: "allow", decision: tools.Deny, reason: "it is not in the allow list of this agent's tools.permission"}
		for _, n := range cfg.Allow {
			re, _ := toolGlob(n)
			out.toolNot = append(out.toolNot, re)
		}
		p.rules = append(p.rules, out)
	}
	for i, r := range cfg.Rules {
		c, err := compileRule(r, fmt.Sprintf("rules[%d]", i))
		if err != nil {
			return nil, err // Validate has already refused it
		}
		p.rules = append(p.rules, c)
	}
	for i, n := range cfg.Allow {
		re, _ := toolGlob(n)
		p.rules = append(p.rules, rule{where: fmt.Sprintf("allow[%d]", i), tool: re, decision: tools.Allow})
	}
	return p, nil
}

// part is the judgement of one thing a call does: the call itself, or one
// simple command or redirection of a bash command line.
type part struct {
	subject string // `the tool "write"`, `the command "rm -rf ~"`
	program string // what a session answer covers (Pattern): the program as written, or the whole command or redirection when the program says too little
	decided bool   // false: this policy has no opinion; the next one decides
	rule    bool   // decided by a rule (not by the mode or a fallback)
	v       tools.Verdict
}

func rank(d tools.Decision) int {
	switch d {
	case tools.Deny:
		return 2
	case tools.Ask:
		return 1
	}
	return 0
}

// approve is the tools/approve listener. Its parts' strictest decision
// stands, except that a Deny from a policy inside this one wins, and parts
// this policy leaves undecided take the inner verdict.
func (p *policy) approve(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
	parts := p.judge(a)
	var worst *part
	undecided := false
	for i := range parts {
		switch {
		case !parts[i].decided:
			undecided = true
		case worst == nil || rank(parts[i].v.Decision) > rank(worst.v.Decision),
			// Of equal decisions, a rule's is the one reported: a hook's
			// allow skips the mode's ask but never a rule's (Prompt).
			rank(parts[i].v.Decision) == rank(worst.v.Decision) && parts[i].rule && !worst.rule:
			worst = &parts[i]
		}
	}
	if worst != nil && worst.v.Decision == tools.Deny {
		return worst.v, nil
	}
	inner, err := next.Call(ctx, a)
	if err != nil || worst == nil {
		if err == nil && inner.Decision == tools.Ask && inner.Pattern == "" && a.Call.Name == BashTool {
			inner.Pattern = pattern(parts, inner.Decision)
		}
		return inner, err
	}
	if inner.Decision == tools.Deny && (inner.Source != "" || undecided) {
		return inner, nil
	}
	out := worst.v
	if undecided && rank(inner.Decision) > rank(out.Decision) {
		out = inner
	}
	if out.Decision == tools.Ask && inner.Decision == tools.Ask &&
		((Prompt(out) && inner.Source != "" && !Prompt(inner)) || hookAsked(inner)) {
		// Two asks: the inner one, a rule's or a hook's, is reported, so a
		// hook's allow does not skip it and --yolo does not answer a hook
		// (also when this policy's own ask is a rule's: the hook's ask is
		// the one no flag may answer).
		out = inner
	}
	if out.Decision == tools.Allow && inner.Decision == tools.Ask && hookAsked(inner) {
		// A PreToolUse hook after this policy asks for a person: its ask
		// stands over this policy's allow, as when the hook runs first.
		out = inner
	}
	if out.Decision == tools.Ask && inner.Decision == tools.Allow && hookAllowed(inner) && !askedByRule(parts) {
		// A PreToolUse hook after this policy allowed the call: it skips
		// this policy's prompt (the mode's ask) as it does when it runs
		// first (see Prompt), so the order of entries does not matter.
		return inner, nil
	}
	// A rewrite from a policy or hook inside this one stands: dropping it
	// would run the call as the model sent it.
	if len(out.Arguments) == 0 {
		out.Arguments = inner.Arguments
	}
	if out.Decision == tools.Ask && a.Call.Name == BashTool {
		out.Pattern = pattern(parts, inner.Decision)
	}
	return out, nil
}

// pattern names the programs of the parts that ask (undecided parts ask
// when the inner verdict does), so "allow for this session" covers those
// programs rather than every bash command.
func pattern(parts []part, inner tools.Decision) string {
	var names []string
	for _, pt := range parts {
		asks := pt.v.Decision == tools.Ask && pt.decided || !pt.decided && inner == tools.Ask
		if asks && pt.program != "" && !slices.Contains(names, pt.program) {
			names = append(names, pt.program)
		}
	}
	return strings.Join(names, " ")
}

// judge splits a call into parts and decides each it can.
func (p *policy) judge(a tools.Approval) []part {
	if a.Call.Name == BashTool {
		return p.judgeBash(a.Call)
	}
	paths := pathArgs(a.Call.Arguments)
	pt := part{subject: fmt.Sprintf("the tool %q", a.Call.Name)}
	if len(paths) > 0 {
		pt.subject += fmt.Sprintf(" on %q", strings.Join(paths, `", "`))
	}
	for i := range p.rules {
		r := &p.rules[i]
		if r.command == nil && r.matchesTool(a.Call.Name) && r.matchesPaths(paths, a.Call.Workspace) {
			return []part{p.byRule(pt, r)}
		}
	}
	return []part{p.byMode(pt, a.Call.Name)}
}

// byRule decides pt by r.
func (p *policy) byRule(pt part, r *rule) part {
	pt.decided, pt.rule = true, true
	pt.v = tools.Verdict{Decision: r.decision, Source: p.source + ":" + r.where}
	var what string
	switch r.decision {
	case tools.Deny:
		what = "is denied by"
	case tools.Ask:
		what = "needs approval under"
	default:
		what = "is allowed by"
	}
	pt.v.Reason = fmt.Sprintf("%s %s %s", pt.subject, what, pt.v.Source)
	if r.reason != "" {
		pt.v.Reason += ": " + r.reason
	} else if r.pattern != "" {
		pt.v.Reason += fmt.Sprintf(" (command %q)", r.pattern)
	} else if r.path != "" {
		pt.v.Reason += fmt.Sprintf(" (path %q)", r.path)
	}
	return pt
}

// byMode decides pt, a call of tool or one of its bash commands, by the
// mode alone.
func (p *policy) byMode(pt part, tool string) part {
	d, why := tools.Decision(""), ""
	switch p.mode {
	case FullAccess:
		d = tools.Allow
	case ReadOnly:
		if slices.Contains(ReadTools, tool) {
			d = tools.Allow
		} else {
			d, why = tools.Deny, "in read-only mode only "+strings.Join(ReadTools, ", ")+" run; a rule of tools.permission can allow more"
		}
	case WorkspaceWrite:
		switch {
		case tool == BashTool:
			d, why = tools.Ask, "in workspace-write mode every bash command no rule allows is asked about"
		case slices.Contains(ReadTools, tool), slices.Contains(FileTools, tool):
			d = tools.Allow
		}
	}
	if d == "" {
		return pt
	}
	return p.decide(pt, d, "mode="+string(p.mode), why)
}

func (p *policy) decide(pt part, d tools.Decision, where, why string) part {
	pt.decided = true
	pt.v = tools.Verdict{Decision: d, Source: p.source + ":" + where}
	switch d {
	case tools.Deny:
		pt.v.Reason = fmt.Sprintf("%s is denied: %s (%s)", pt.subject, why, pt.v.Source)
	case tools.Ask:
		pt.v.Reason = fmt.Sprintf("%s needs approval: %s (%s)", pt.subject, why, pt.v.Source)
	default:
		pt.v.Reason = fmt.Sprintf("%s is allowed by %s", pt.subject, pt.v.Source)
	}
	return pt
}
