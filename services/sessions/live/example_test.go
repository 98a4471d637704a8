package live_test

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// An entry point serving one browser tab: attach from the last seq the tab
// holds, forward updates, answer questions, and re-attach after a drop.
func ExampleHub_Attach() {
	var agent agents.Agent // the session's agent
	hub, err := live.New(agent, live.Options{})
	if err != nil {
		return
	}
	defer hub.Close()
	ctx := stdctx.Background()
	var last int64 // what the tab holds
	for {
		c, err := hub.Attach(ctx, live.AttachOptions{AfterSeq: last, Approvals: true, Name: "tab-1"})
		if err != nil {
			return
		}
		for {
			u, err := c.Next(ctx)
			if errs.HasCode(err, live.Overflow) {
				break // re-attach from c.LastSeq()
			}
			if err != nil {
				return
			}
			switch u.Kind {
			case live.KindQuestion:
				// In a real client the person answers, later.
				_ = c.Answer(u.Question.ID, approval.Answer{Choice: approval.Deny, Reason: "not now"})
			default:
				fmt.Println(u.Kind) // send to the tab
			}
		}
		last = c.LastSeq()
	}
}
