package sessions_test

import (
	"errors"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
)

// overTheWire encodes err as errs' JSON and decodes it, as a process or
// host boundary does: only codes, reasons, messages and details survive.
func overTheWire(t *testing.T, err error) error {
	t.Helper()
	b, encErr := errs.Encode(err)
	if encErr != nil {
		t.Fatal(encErr)
	}
	out, decErr := errs.Decode(b)
	if decErr != nil {
		t.Fatal(decErr)
	}
	if _, same := out.(*errs.Error); same && out == err {
		t.Fatal("decode returned the original value")
	}
	return out
}

// TestRefusalMappingHoldsAcrossAProcessBoundary: the controller's refusals,
// decoded from JSON, map to the same session errors as the originals, and
// the session error itself survives another crossing.
func TestRefusalMappingHoldsAcrossAProcessBoundary(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		code       errs.Code
		reason     string
		presented  bool
		isRejected bool
	}{
		{"plugin refusal", agentcontroller.AgentAdmissionRejected("admission/rate-limited", "slow down", true, nil),
			sessions.PromptRejected, "admission/rate-limited", true, true},
		{"admission failed", agentcontroller.AgentAdmissionRejected(agentcontroller.ReasonAdmissionFailed, "the check failed", false, errors.New("boom")),
			sessions.PromptRejected, agentcontroller.ReasonAdmissionFailed, false, true},
		{"agent gone", agentcontroller.AgentAdmissionRejected(agentcontroller.ReasonAgentGone, "gone", false, nil),
			sessions.Closed, sessions.ReasonAgentGone, false, false},
		{"controller stopped", agentcontroller.AgentAdmissionRejected(agentcontroller.ReasonStopped, "stopped", false, nil),
			sessions.Closed, sessions.ReasonControllerStopped, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, in := range []error{c.err, overTheWire(t, c.err)} {
				got := sessions.DeliveryError("s1", "r1", in)
				if !errs.Has(got, c.code, c.reason) {
					t.Fatalf("%v: want %s (%s)", got, c.code, c.reason)
				}
				if !agentcontroller.IsRejected(got) {
					t.Fatal("the controller's refusal must stay the cause")
				}
				back := overTheWire(t, got)
				r, ok := sessions.RejectionOf(back)
				if ok != c.isRejected {
					t.Fatalf("RejectionOf after crossing: %v", ok)
				}
				if ok && (r.Reason != c.reason || r.Presented != c.presented || r.RequestID != "r1") {
					t.Fatalf("rejection after crossing: %+v", r)
				}
				if !errs.Has(back, c.code, c.reason) {
					t.Fatalf("the session error lost its code crossing: %v", back)
				}
			}
		})
	}
	plain := errors.New("disk full")
	if sessions.DeliveryError("s1", "", plain) != plain {
		t.Fatal("an error that is no refusal passes unchanged")
	}
}
