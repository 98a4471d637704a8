package main

import (
	"testing"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/sdktest"
)

func message(text string) *sdk.Admission {
	return &sdk.Admission{AgentId: "main", Message: &sdk.Message{Role: "user", Content: text}}
}

// TestRefusesTheWord drives the plugin in this process, through the same
// gRPC protocol dsh speaks.
func TestRefusesTheWord(t *testing.T) {
	h := sdktest.Start(t, newPlugin(), sdktest.WithConfig(map[string]any{"word": "Password"}))
	for _, text := range []string{"my password is hunter2", "PASSWORD: x"} {
		got, err := h.Admission(t.Context(), message(text), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Decision.GetKind() != "reject" || got.Decision.GetReason() != "no-secrets/word" || got.Next != nil {
			t.Fatalf("%q: got %v (next called: %v), want a refusal without next", text, got.Decision, got.Next != nil)
		}
	}
	got, err := h.Admission(t.Context(), message("hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Decision.GetKind() != "admit" || got.Next.GetMessage().GetContent() != "hello" {
		t.Fatalf("hello: got %v, want it passed on and admitted", got.Decision)
	}
}

// TestBinary builds the plugin and starts it as dsh does: a child process,
// go-plugin's handshake, AutoMTLS.
func TestBinary(t *testing.T) {
	h := sdktest.Exec(t, sdktest.Build(t, "."), nil, sdktest.WithConfig(map[string]any{"word": "password"}))
	if d := h.Describe(); d.GetName() != "no-secrets" || !h.Listens(sdk.AdmissionEvent) {
		t.Fatalf("described as %v", d)
	}
	got, err := h.Admission(t.Context(), message("the password"), nil)
	if err != nil || got.Decision.GetKind() != "reject" {
		t.Fatalf("got %v, %v; want a refusal", got, err)
	}
}
