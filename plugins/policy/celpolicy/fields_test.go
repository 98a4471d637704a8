package celpolicy

import (
	"fmt"
	"sync"
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"github.com/dsh-go/dsh/services/llm"
)

// fieldExprs read the interned fields every way a rule can reach them:
// through the variables, through a nested struct, through list elements
// and macros, and as whole objects.
var fieldExprs = map[string][]string{
	stageAdmission: {
		`source.entry`,
		`source.principal.kind + "/" + source.principal.id + "/" + source.principal.tenant`,
		`source.on_behalf_of.id`,
		`request.agent + ":" + request.mode`,
		`source.principal == source.on_behalf_of`,
		`has(source.principal.kind) && source.principal.kind != ""`,
		`request.attachments.map(a, a.name).join(",")`,
		`request.attachments.size() == 0 && request.attachments == [] && !request.attachments.exists(a, a.size > 0)`,
		`source.entry == "webhook" && request.content.contains("deploy")`,
	},
	stageApproval: {
		`call.tool + "@" + call.agent`,
		`sources.map(s, s.principal.tenant).join(",")`,
		`sources.exists(s, s.entry == "webhook")`,
		`sources.size() > 0 ? sources[0].principal.id : "none"`,
		`source.principal.kind`,
	},
}

// who are inputs whose fields change from one evaluation to the next, and
// repeat, so every cache both hits and misses.
var who = []Source{
	{Entry: "serve", Principal: Principal{Kind: "token", ID: "alice", Tenant: "acme"}},
	{Entry: "webhook", Principal: Principal{Kind: "webhook", ID: "gh", Tenant: "acme"}, Unattended: true},
	{Entry: "serve", Principal: Principal{Kind: "token", ID: "alice", Tenant: "acme"}},
	{Entry: "subagent", Principal: Principal{Kind: "agent", ID: "a1", Tenant: "evil-corp"}, OnBehalfOf: Principal{Kind: "token", ID: "bob"}},
	{Entry: "serve", Principal: Principal{Kind: "token", ID: "bob", Tenant: "acme"}, OnBehalfOf: Principal{Kind: "token", ID: "bob", Tenant: "acme"}},
	{},
}

func activationFor(i int) *activation {
	s := who[i%len(who)]
	a := &activation{source: s, params: celValue(map[string]any{})}
	a.request = Request{Agent: fmt.Sprintf("agent-%d", i%3), Mode: []string{"followup", "steer"}[i%2], Content: fmt.Sprintf("deploy %d", i)}
	if i%2 == 1 {
		a.request.Attachments = []Attachment{{Type: "file", Name: s.Principal.ID}}
	}
	a.call = Call{Tool: []string{"bash", "write", "bash"}[i%3], Agent: s.Principal.ID}
	for j := 0; j <= i%3; j++ {
		a.sources = append(a.sources, who[(i+j)%len(who)])
	}
	return a
}

// TestFastFieldsReadWhatTheNativeProviderReads evaluates the same
// expressions with and without fastFields, over inputs that change under
// the caches, from several goroutines at once (the caches are shared by
// every evaluation of a program): the answers must be the same.
func TestFastFieldsReadWhatTheNativeProviderReads(t *testing.T) {
	fast, err := newEnvs(true)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := newEnvs(false)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(env *cel.Env, expr string) cel.Program {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", expr, iss.Err())
		}
		p, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for stage, exprs := range fieldExprs {
		for _, expr := range exprs {
			f, p := compile(fast[stage], expr), compile(plain[stage], expr)
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 200 {
						act := activationFor(i*7 + g)
						got, _, err1 := f.Eval(act)
						want, _, err2 := p.Eval(act)
						if (err1 == nil) != (err2 == nil) || (err1 == nil && got.Equal(want) != types.True) {
							t.Errorf("%s on input %d: fastFields %v (%v), native %v (%v)", expr, i*7+g, got, err1, want, err2)
							return
						}
					}
				}()
			}
			wg.Wait()
		}
	}
}

// TestFirstRuleWithTheDisjunction: the any program only answers "no rule";
// which rule, and what a failing rule does under each failure policy,
// stays what the rule-by-rule order says.
func TestFirstRuleWithTheDisjunction(t *testing.T) {
	const (
		fails = `params.missing == "x"`
		holds = `source.entry == "serve"`
		never = `source.entry == "webhook"`
	)
	for _, c := range []struct {
		when    []string
		policy  string
		rule    string // "" no rule
		failure bool
	}{
		{[]string{never, never}, "", "", false},
		{[]string{never, holds}, "", "r1", false},
		{[]string{holds, fails}, "", "r0", false},
		{[]string{fails, holds}, "", "r0", true},
		{[]string{fails, holds}, "ignore", "r1", false},
		{[]string{fails, never}, "", "r0", true},
		{[]string{fails, never}, "ignore", "", false},
	} {
		var rules Rules
		for i, w := range c.when {
			rules.Admission = append(rules.Admission, Rule{Name: fmt.Sprintf("r%d", i), When: w, Action: "refuse"})
		}
		rs, err := compile(rules, c.policy, "test", nil)
		if err != nil {
			t.Fatal(err)
		}
		act := &activation{source: sourceOfProvenance(llm.Provenance{Entry: "serve"}, false), params: rs.params}
		r, _, err := rs.first(rs.firstAdmission, rs.admission, act)
		name := ""
		if r != nil {
			name = r.Name
		}
		if name != c.rule || (err != nil) != c.failure {
			t.Errorf("%v under %q: rule %q, error %v; want rule %q, error %v", c.when, c.policy, name, err, c.rule, c.failure)
		}
	}
}
