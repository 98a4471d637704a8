package execplugin_test

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
)

// mallory is the real sender of the tests below; the plugin claims
// token:root sent the message, through the cli.
var mallory = agentcontroller.Source{Kind: agentcontroller.SourceUser, RPCID: "http", Entry: "serve",
	Principal: agentcontroller.Principal{Kind: "token", ID: "mallory", Tenant: "acme"}}

// deliverAs delivers text to main from src and waits for its turn.
func deliverAs(h *host.Host, src agentcontroller.Source, text string) error {
	a, _ := h.Agent("main")
	_, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Source: src, Content: text, RequestID: "req-" + text})
	if err == nil {
		a.WhenIdle(stdctx.Background())
	}
	return err
}

// TestAPluginCannotForgeTheSenderForTheListenersAfterIt: a binary on the
// admission stage passes the message on claiming another principal; the
// policy.cel rule after it judges the real sender, and the message enters
// the inbox with it — while the binary's content rewrite goes through.
func TestAPluginCannotForgeTheSenderForTheListenersAfterIt(t *testing.T) {
	bin, _ := binaries(t)
	cel := `  - use: policy.cel
    config:
      admission:
        - name: no-mallory
          when: source.principal.id in ["mallory", "root"] || source.entry != "serve"
          action: refuse
          message_expression: '"policy.cel saw " + source.principal.kind + ":" + source.principal.id + " through " + source.entry'
`
	h, _ := startExec(t, execConfig(bin, `{impersonate: "token:root", upper: true}`, cel))
	err := deliverAs(h, mallory, "deploy")
	rej, ok := agentcontroller.RefusalOf(err)
	if !ok || rej.Reason != "policy/no-mallory" || !strings.Contains(rej.Message, "saw token:mallory through serve") {
		t.Fatalf("mallory's message, passed on as root's, was decided %v", err)
	}

	alice := mallory
	alice.Principal = agentcontroller.Principal{Kind: "token", ID: "alice", Tenant: "acme"}
	if err := deliverAs(h, alice, "hello"); err != nil {
		t.Fatalf("alice's message: %v", err)
	}
	a, _ := h.Agent("main")
	var got *llm.Message
	for _, e := range a.Session().Events(1) {
		if e.Message != nil && e.Message.Role == llm.RoleUser {
			got = e.Message
		}
	}
	if got == nil || got.Content != "HELLO" || got.RequestID != "req-hello" || got.From == nil || got.From.Principal != alice.Principal || got.From.Entry != "serve" {
		t.Fatalf("the message entered the inbox as %+v (from %+v)", got, got.From)
	}
}

// TestAPolicyPluginCannotForgeWhomACallActsFor: a binary on tools/approve
// passes the call on with its sources claiming token:root; the policy.cel
// rule after it sees the turn's real sender, and denies.
func TestAPolicyPluginCannotForgeWhomACallActsFor(t *testing.T) {
	bin, _ := binaries(t)
	cel := `  - use: policy.cel
    config:
      approval:
        - name: no-mallory
          when: sources.exists(s, s.principal.id in ["mallory", "root"])
          action: deny
          message_expression: '"policy.cel saw " + sources.map(s, s.principal.kind + ":" + s.principal.id).join(",")'
`
	h, _ := startExec(t, policyConfig(bin, "impersonate", cel))
	if err := deliverAs(h, mallory, "what time is it"); err != nil {
		t.Fatal(err)
	}
	r := lastToolResult(t, h)
	if !r.IsError || !strings.Contains(r.Content, "policy.cel saw token:mallory") || strings.Contains(r.Content, "root") {
		t.Fatalf("the model was told %q", r.Content)
	}
}

func lastToolResult(t *testing.T, h *host.Host) llm.Message {
	t.Helper()
	a, _ := h.Agent("main")
	var out *llm.Message
	for _, e := range a.Session().Events(1) {
		if e.Message != nil && e.Message.Role == llm.RoleTool {
			out = e.Message
		}
	}
	if out == nil {
		t.Fatalf("the turn has no tool result: %d events", len(a.Session().Events(1)))
	}
	return *out
}
