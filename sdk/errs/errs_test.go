package errs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/sdk/errs"
)

const refused errs.Code = "AGENT_ADMISSION_REJECTED"

func TestErrorString(t *testing.T) {
	e := errs.Wrap(refused, errors.New("disk full"), "cannot admit").WithReason("agent-controller/admission-failed")
	want := "AGENT_ADMISSION_REJECTED (agent-controller/admission-failed): cannot admit: disk full"
	if e.Error() != want {
		t.Fatalf("got %q", e.Error())
	}
}

func TestMatchByCodeAndReasonThroughWrapping(t *testing.T) {
	inner := errs.New(refused, "no").WithReason("agent-controller/agent-gone")
	err := fmt.Errorf("deliver: %w", inner)
	if !errs.HasCode(err, refused) || !errs.Has(err, refused, "agent-controller/agent-gone") {
		t.Fatal("code and reason must match through %w")
	}
	if errs.Has(err, refused, "other") || errs.HasCode(err, errs.Internal) {
		t.Fatal("a different reason or code must not match")
	}
	if errs.CodeOf(err) != refused || errs.ReasonOf(err) != "agent-controller/agent-gone" {
		t.Fatal("CodeOf/ReasonOf")
	}
	if errs.CodeOf(errors.New("plain")) != "" {
		t.Fatal("plain errors have no code")
	}
	if !errors.Is(err, errs.New(refused, "any message")) {
		t.Fatal("errors.Is with a template must match on code")
	}
	cause := errors.New("root cause")
	if !errors.Is(errs.Wrap(errs.Internal, cause, "x"), cause) {
		t.Fatal("Unwrap must expose the cause")
	}
}

func TestJSONRoundTripKeepsCodesOfTheChain(t *testing.T) {
	orig := errs.Wrap(refused, fmt.Errorf("listener: %w", errs.New(errs.ListenerFailed, "panicked").WithReason("event/panic")), "refused").
		WithReason("agent-controller/admission-failed")
	orig.Details = map[string]any{"presented": true}
	b, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}
	var back errs.Error
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Code != refused || back.Reason != "agent-controller/admission-failed" || back.Message != "refused" || back.Details["presented"] != true {
		t.Fatalf("lost fields: %+v", back)
	}
	if !errs.Has(&back, errs.ListenerFailed, "event/panic") {
		t.Fatalf("inner code lost across the boundary: %v", &back)
	}
	if back.Error() != orig.Error() {
		t.Fatalf("text changed:\n%s\n%s", back.Error(), orig.Error())
	}
	// Encode/Decode accept any error.
	b, _ = errs.Encode(errors.New("plain"))
	dec, err := errs.Decode(b)
	if err != nil || dec.Error() != "plain" || errs.CodeOf(dec) != "" {
		t.Fatalf("plain round trip: %v %v", dec, err)
	}
	if _, err := errs.Decode([]byte("{")); err == nil {
		t.Fatal("bad JSON must fail")
	}
}

func ExampleHas() {
	err := fmt.Errorf("deliver: %w",
		errs.New("AGENT_ADMISSION_REJECTED", "too many messages").WithReason("admission/rate-limited"))
	// Match by code and reason, never by Go type.
	fmt.Println(errs.Has(err, "AGENT_ADMISSION_REJECTED", "admission/rate-limited"))
	// Output: true
}
