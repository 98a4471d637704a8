package permission

import (
	"fmt"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
	"github.com/dsh-go/dsh/services/tools"
)

// anyCommandRule is the first bash rule that takes any command, even one
// that cannot be read before it runs.
func (p *policy) anyCommandRule() *rule {
	for i := range p.rules {
		r := &p.rules[i]
		if r.path == "" && r.matchesTool(BashTool) && r.matchesAnyCommand() {
			return r
		}
	}
	return nil
}

// byRules decides pt, the command c, by the rules in order: the first rule
// c surely matches decides, unless a rule before it that c could match
// once its words are expanded (a glob, "$@", $X) denies or asks, which
// is then held against it. No rule: fallback decides.
func (p *policy) byRules(pt part, c shell.Command, fallback fallback) part {
	known := exact(c.Words)
	var worst *rule
	sure := false // a rule surely matches: the fallback never decides
	for i := range p.rules {
		r := &p.rules[i]
		if r.path != "" || !r.matchesTool(BashTool) {
			continue
		}
		if r.matchesCommand(c) {
			if worst == nil || rank(r.decision) > rank(worst.decision) {
				return p.byRule(pt, r)
			}
			sure = true
			break
		}
		if !known && r.decision != tools.Allow && r.mayMatchCommand(c) && (worst == nil || rank(r.decision) > rank(worst.decision)) {
			worst = r
		}
	}
	if worst == nil {
		return p.fallBack(pt, fallback)
	}
	if fb := p.fallBack(pt, fallback); !sure && fb.decided && rank(fb.v.Decision) > rank(worst.decision) {
		return fb
	}
	out := p.byRule(pt, worst)
	out.v.Reason += "; some of its words are known only at run time and could match it"
	return out
}

// fallback says how a command no rule decides is decided: by the mode,
// or, for a program that runs others (runner), as unreadable under the
// name whole.
type fallback struct {
	whole  *part
	runner string
}

func (p *policy) fallBack(pt part, f fallback) part {
	if f.runner == "" {
		return p.byMode(pt, BashTool)
	}
	return p.unreadable(*f.whole, f.runner+" runs other commands")
}

// opaque decides pt, which runs code known only at run time: it could be
// any command, so every rule that denies or asks is held against it, up
// to the first rule that takes every command. fallback decides when no
// rule does, and wins a tie (its reason says more).
func (p *policy) opaque(pt part, why string, fallback part) part {
	var worst, all *rule
	for i := range p.rules {
		r := &p.rules[i]
		if r.path != "" || !r.matchesTool(BashTool) {
			continue
		}
		if r.matchesAnyCommand() {
			all = r
			break
		}
		if r.decision != tools.Allow && (worst == nil || rank(r.decision) > rank(worst.decision)) {
			worst = r
		}
	}
	switch {
	case worst == nil && all != nil:
		return p.byRule(pt, all)
	case worst == nil:
		return fallback
	case all != nil && rank(all.decision) > rank(worst.decision):
		worst = all
	case all == nil && fallback.decided && rank(fallback.v.Decision) >= rank(worst.decision):
		return fallback
	}
	out := p.byRule(pt, worst)
	out.v.Reason += fmt.Sprintf("; %s, so it is held to every rule that denies or asks", why)
	return out
}

// unreadable decides a command whose meaning is not known before it runs:
// by a rule that takes every command, else allowed in full-access mode,
// denied in read-only mode and asked about otherwise.
func (p *policy) unreadable(pt part, why string) part {
	if r := p.anyCommandRule(); r != nil {
		return p.byRule(pt, r)
	}
	switch p.mode {
	case FullAccess, ReadOnly:
		return p.byMode(pt, BashTool)
	}
	return p.decide(pt, tools.Ask, "unreadable", why+", so it cannot be judged before it runs")
}
