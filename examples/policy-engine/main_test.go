package main

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/sdk/sdktest"
)

var rules = map[string]any{"rules": []map[string]any{
	{"name": "no-webhooks", "stage": "admission", "effect": "refuse", "entry": []string{"webhook"}, "message": "webhooks are off"},
	{"name": "owner-only-writes", "stage": "approval", "effect": "ask", "tools": []string{"write", "edit"}, "unless_principal": []string{"token:alice"}},
}}

func principal(kind, id string) *pluginv1.Principal { return &pluginv1.Principal{Kind: kind, Id: id} }

// TestEngineThroughTheProtocol builds the binary and starts it as dsh
// does (a child process, go-plugin's handshake, AutoMTLS): the provenance
// reaches it in the payloads and its decisions come back naming the
// policy, its version and the rule.
func TestEngineThroughTheProtocol(t *testing.T) {
	h := sdktest.Exec(t, sdktest.Build(t, "."), nil, sdktest.WithConfig(rules))
	if !h.Listens(sdk.AdmissionEvent) || !h.Listens(sdk.ApprovalEvent) {
		t.Fatalf("described as %v", h.Describe())
	}

	hook := &sdk.Admission{AgentId: "main", Message: &sdk.Message{Role: "user", Content: "build failed"},
		Source: &sdk.Source{Kind: "webhook", Entry: "webhook", Principal: principal("webhook", "ci")}}
	got, err := h.Admission(t.Context(), hook, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := got.Decision
	if d.GetKind() != "reject" || d.GetReason() != "policy-engine/no-webhooks" || d.GetPolicy() != Name || !strings.HasPrefix(d.GetPolicyVersion(), "sha256:") || got.Next != nil {
		t.Fatalf("the webhook's prompt: %v", d)
	}
	web := &sdk.Admission{AgentId: "main", Message: &sdk.Message{Role: "user", Content: "hi"},
		Source: &sdk.Source{Kind: "user", Entry: "serve", Principal: principal("token", "bob")}}
	if got, err := h.Admission(t.Context(), web, nil); err != nil || got.Decision.GetKind() != "admit" || got.Next == nil {
		t.Fatalf("bob's prompt: %v %v", got, err)
	}

	write := func(who *pluginv1.Principal) *sdk.Approval {
		return &sdk.Approval{AgentId: "main", Call: &pluginv1.ToolCall{Id: "c1", Name: "write", Arguments: `{"path":"docs/a.md"}`},
			Sources: []*pluginv1.Provenance{{Principal: who, Entry: "serve"}}}
	}
	a, err := h.Approval(t.Context(), write(principal("token", "bob")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Verdict; v.GetDecision() != "ask" || v.GetSource() != Name || !strings.HasPrefix(v.GetReason(), "policy-engine/owner-only-writes") || v.GetPolicyVersion() != d.GetPolicyVersion() {
		t.Fatalf("bob's write: %v", v)
	}
	if a, err := h.Approval(t.Context(), write(principal("token", "alice")), nil); err != nil || a.Verdict.GetDecision() != "allow" || a.Verdict.GetSource() != "" {
		t.Fatalf("alice's write: %v %v", a, err)
	}
}
