package celpolicy

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/tools"
)

// TestRulesAreTypeChecked: a rule naming a field its stage's types lack,
// a variable of the other stage, or of the wrong type fails to compile
// with the rule's key path and what is wrong.
func TestRulesAreTypeChecked(t *testing.T) {
	for name, c := range map[string]struct {
		rules Rules
		path  string
		says  string
	}{
		"unknown field":  {Rules{Admission: []Rule{{Name: "a", When: `source.principal.user == "x"`, Action: "refuse"}}}, "admission[0].when", "undefined field 'user'"},
		"other stage":    {Rules{Admission: []Rule{{Name: "a", When: `call.tool == "bash"`, Action: "refuse"}}}, "admission[0].when", "undeclared reference to 'call'"},
		"not a bool":     {Rules{Approval: []Rule{{Name: "a", When: `call.tool`, Action: "deny"}}}, "approval[0].when", "must be a bool"},
		"type mismatch":  {Rules{Approval: []Rule{{Name: "a", When: `call.tool == 3`, Action: "deny"}}}, "approval[0].when", "no matching overload"},
		"wrong action":   {Rules{Approval: []Rule{{Name: "a", When: `true`, Action: "refuse"}}}, "approval[0].action", "use one of allow, deny, ask"},
		"duplicate name": {Rules{Approval: []Rule{{Name: "a", When: `true`, Action: "deny"}, {Name: "a", When: `true`, Action: "ask"}}}, "approval[1].name", "also approval[0]"},
		"bad message":    {Rules{Approval: []Rule{{Name: "a", When: `true`, Action: "deny", MessageExpression: `1 + 2`}}}, "approval[0].message_expression", "must be a string"},
	} {
		_, err := compile(c.rules, "", "test", nil)
		pe, ok := err.(*pathError)
		if !ok || pe.path != c.path || !strings.Contains(pe.err.Error(), c.says) {
			t.Errorf("%s: %v, want %s: …%s…", name, err, c.path, c.says)
		}
	}
}

// TestApprovalSeesProvenance evaluates a compiled rule set against a call
// the way the approval stage hands it over.
func TestApprovalSeesProvenance(t *testing.T) {
	rs, err := compile(Rules{Approval: []Rule{
		{Name: "no-net-webhook", When: `sources.exists(s, s.entry == "webhook") && call.tool in params.network`, Action: "deny", Message: "no network for webhooks"},
		{Name: "writes-outside-src", When: `call.tool in ["write", "edit"] && !call.path.startsWith("src/") && source.principal.id != params.owner`, Action: "ask",
			MessageExpression: `source.principal.id + " writes " + call.path`},
	}, Params: map[string]any{"network": []any{"fetch"}, "owner": "alice"}}, "", "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{}
	p.rules.Store(rs)
	web := llm.Provenance{Principal: llm.Principal{Kind: "webhook", ID: "gh"}, Entry: "webhook"}
	bob := llm.Provenance{Principal: llm.Principal{Kind: "token", ID: "bob"}, Entry: "serve"}
	alice := llm.Provenance{Principal: llm.Principal{Kind: "token", ID: "alice"}, Entry: "serve"}
	for _, c := range []struct {
		call   tools.Call
		rule   string
		reason string
	}{
		{tools.Call{Name: "fetch", Arguments: []byte(`{}`), Sources: []llm.Provenance{bob, web}}, "no-net-webhook", "policy/no-net-webhook: no network for webhooks"},
		{tools.Call{Name: "fetch", Arguments: []byte(`{}`), Sources: []llm.Provenance{bob}}, "", ""},
		{tools.Call{Name: "write", Workspace: "/w", Arguments: []byte(`{"path":"docs/a.md"}`), Sources: []llm.Provenance{bob}}, "writes-outside-src", "policy/writes-outside-src: bob writes docs/a.md"},
		{tools.Call{Name: "write", Workspace: "/w", Arguments: []byte(`{"path":"/w/src/a.go"}`), Sources: []llm.Provenance{bob}}, "", ""},
		{tools.Call{Name: "write", Workspace: "/w", Arguments: []byte(`{"path":"docs/a.md"}`), Sources: []llm.Provenance{alice}}, "", ""},
	} {
		act := &activation{call: callOf(c.call), params: rs.params}
		for _, s := range c.call.Sources {
			act.sources = append(act.sources, sourceOfProvenance(s, false))
		}
		act.source = act.sources[0]
		r, msg, err := rs.first(rs.firstApproval, rs.approval, act)
		if err != nil {
			t.Fatalf("%s: %v", c.call.Name, err)
		}
		switch {
		case c.rule == "" && r != nil:
			t.Errorf("%+v: rule %s applied", c.call, r.Name)
		case c.rule != "" && (r == nil || r.Name != c.rule || reason(r)+": "+msg != c.reason):
			t.Errorf("%+v: %v %q, want %s %q", c.call, r, msg, c.rule, c.reason)
		}
	}
}
