// Command policy-engine is a dsh plugin binary that is a policy engine of
// its own: a rule set as data, judged in its own process, joining the same
// two stages policy.cel joins — admission (refuse or admit a message) and
// approval (allow, deny or ask about a tool call) — through the plugin
// protocol. It shows the seam another engine (OPA, Cedar) plugs into: the
// payloads carry the provenance (the message's source; the call's sources),
// and the decisions name the policy and its version, as policy.cel's do.
//
//	go build -o bin/dsh-policy-engine ./examples/policy-engine
//
//	plugins:
//	  - id: engine
//	    exec: ./bin/dsh-policy-engine
//	    config:
//	      rules:
//	        - {name: no-webhooks, stage: admission, effect: refuse, entry: [webhook], message: "webhooks are off"}
//	        - {name: owner-only-writes, stage: approval, effect: ask, tools: [write, edit], unless_principal: ["token:alice"]}
package main

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// Name is the plugin's name and the Policy its decisions name.
const Name = "policy-engine"

// Rule matches when every condition it sets holds; the first rule of its
// stage that matches decides.
type Rule struct {
	Name string `json:"name"`
	// Stage is admission or approval.
	Stage string `json:"stage"`
	// Effect: refuse or admit (admission); allow, deny or ask (approval).
	Effect  string `json:"effect"`
	Message string `json:"message"`
	// Entry lists entry points (webhook, serve, cli, ...), Principal
	// principals as kind:id, Tenant tenants; at approval a call matches
	// when any source of its turn does.
	Entry     []string `json:"entry"`
	Principal []string `json:"principal"`
	Tenant    []string `json:"tenant"`
	// UnlessPrincipal exempts the principals it lists (the first source
	// of a call's turn).
	UnlessPrincipal []string `json:"unless_principal"`
	// Tools lists tool names (approval only).
	Tools []string `json:"tools"`
}

// Config is the plugin's config: its rules.
type Config struct {
	Rules []Rule `json:"rules"`
}

func main() { newPlugin().Serve() }

func newPlugin() *sdk.Plugin {
	var cfg Config
	var version string
	p := sdk.New(Name, "1.0.0")
	p.OnConfigure(func(raw json.RawMessage) error {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return err
		}
		for i, r := range cfg.Rules {
			ok := (r.Stage == "admission" && slices.Contains([]string{"refuse", "admit"}, r.Effect)) ||
				(r.Stage == "approval" && slices.Contains([]string{"allow", "deny", "ask"}, r.Effect))
			if r.Name == "" || !ok {
				return fmt.Errorf("rules[%d] (%q): needs a name, stage admission with effect refuse or admit, or stage approval with effect allow, deny or ask", i, r.Name)
			}
		}
		sum := sha256.Sum256(raw)
		version = "sha256:" + hex.EncodeToString(sum[:8])
		return nil
	})
	p.Admission(func(ctx stdctx.Context, a *sdk.Admission, next sdk.AdmissionNext) (*sdk.Decision, error) {
		src := a.GetSource()
		for _, r := range cfg.Rules {
			if r.Stage != "admission" || !r.matchesSource(src.GetEntry(), src.GetPrincipal()) || exempt(r, src.GetPrincipal()) {
				continue
			}
			if r.Effect == "admit" {
				break
			}
			d := sdk.Reject(Name+"/"+r.Name, r.text(), false)
			d.Policy, d.PolicyVersion = Name, version
			return d, nil
		}
		return next(ctx, a)
	})
	p.Approval(func(ctx stdctx.Context, a *sdk.Approval, next sdk.ApprovalNext) (*sdk.Verdict, error) {
		sources := a.GetSources()
		var first *pluginv1.Principal
		if len(sources) > 0 {
			first = sources[0].GetPrincipal()
		}
		for _, r := range cfg.Rules {
			if r.Stage != "approval" || (len(r.Tools) > 0 && !slices.Contains(r.Tools, a.GetCall().GetName())) || exempt(r, first) {
				continue
			}
			matched := len(r.Entry)+len(r.Principal)+len(r.Tenant) == 0
			for _, s := range sources {
				matched = matched || r.matchesSource(s.GetEntry(), s.GetPrincipal())
			}
			if !matched {
				continue
			}
			v := &sdk.Verdict{Decision: r.Effect, Reason: Name + "/" + r.Name + ": " + r.text(), Source: Name, PolicyVersion: version}
			if r.Effect == "deny" {
				return v, nil
			}
			// An allow or ask hears the policies after it; their deny stands.
			after, err := next(ctx, a)
			if err != nil || (after.GetDecision() == "deny" && after.GetSource() != "") {
				return after, err
			}
			return v, nil
		}
		return next(ctx, a)
	})
	return p
}

func (r Rule) matchesSource(entry string, who *pluginv1.Principal) bool {
	return (len(r.Entry) == 0 || slices.Contains(r.Entry, entry)) &&
		(len(r.Principal) == 0 || slices.Contains(r.Principal, who.GetKind()+":"+who.GetId())) &&
		(len(r.Tenant) == 0 || slices.Contains(r.Tenant, who.GetTenant()))
}

func exempt(r Rule, who *pluginv1.Principal) bool {
	return who != nil && slices.Contains(r.UnlessPrincipal, who.GetKind()+":"+who.GetId())
}

func (r Rule) text() string {
	if strings.TrimSpace(r.Message) != "" {
		return r.Message
	}
	return "rule " + r.Name + " applies"
}
