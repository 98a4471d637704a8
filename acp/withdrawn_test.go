package acp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// A call whose approval a cancel withdrew never ran, and the model is told
// so: not "it may have partly run", which would send it to check for
// effects that cannot exist.
func TestWithdrawnApprovalIsReportedAsNotRun(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "never"}}})
	id := e.newSession()
	done := make(chan error, 1)
	go func() {
		_, err := e.prompt(id, "go")
		done <- err
	}()
	select {
	case <-e.c.asked:
	case <-time.After(wait):
		t.Fatal("not asked")
	}
	if err := e.conn.Cancel(e.ctx(), acp.CancelNotification{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	u := e.c.waitFor(t, "the call's result", func(u acp.SessionUpdate) bool {
		return u.ToolCallUpdate != nil && u.ToolCallUpdate.ToolCallId == "call_1" && u.ToolCallUpdate.Status != nil &&
			*u.ToolCallUpdate.Status == acp.ToolCallStatusFailed
	}).ToolCallUpdate
	told, _ := u.RawOutput.(string)
	if strings.Contains(told, "partly run") || !strings.Contains(told, "did not run") {
		t.Fatalf("the model was told %q", told)
	}
	select {
	case <-gate.started:
		t.Fatal("the gate ran")
	default:
	}
}
