package sessions_test

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestARetryOfARefusedPromptWithATextPart: a prompt whose parts add text
// of their own is refused; its record keeps the text without the parts.
// The same prompt retried is the same request — told the first refusal —
// and not a request id reused for other text.
func TestARetryOfARefusedPromptWithATextPart(t *testing.T) {
	e, _, _ := attachEnv(t)
	if _, err := agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if strings.HasPrefix(a.Message.Content, "no") {
			return agentcontroller.Reject("test/no", "not this one", false), nil
		}
		return next.Call(ctx, a)
	}); err != nil {
		t.Fatal(err)
	}
	s := e.open(sessions.OpenOptions{SessionID: "refused"})
	defer s.Detach(stdctx.Background())
	req := func() sessions.PromptRequest {
		return sessions.PromptRequest{RequestID: "r1", Content: "no", Parts: []llm.Part{{Type: llm.PartText, Name: "notes.txt", Text: "the notes"}}}
	}
	if _, err := s.Prompt(stdctx.Background(), req()); !errs.HasCode(err, sessions.PromptRejected) {
		t.Fatalf("first: %v; want %s", err, sessions.PromptRejected)
	}
	_, err := s.Prompt(stdctx.Background(), req())
	if !errs.HasCode(err, sessions.PromptRejected) {
		t.Fatalf("the same prompt retried: %v; want the first refusal (%s)", err, sessions.PromptRejected)
	}
}
