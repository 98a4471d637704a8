package sdk_test

import (
	stdctx "context"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/sdk"
)

// An approval policy: no deleting, ask before pushing, pin git to the
// workspace's repository, leave the rest to the policies after it.
func ExamplePlugin_Approval() {
	p := sdk.New("git-policy", "1.0.0")
	p.Approval(func(ctx stdctx.Context, a *sdk.Approval, next sdk.ApprovalNext) (*sdk.Verdict, error) {
		args := a.GetCall().GetArguments()
		switch {
		case strings.Contains(args, "rm -rf"):
			return sdk.DenyCall("deleting trees is not allowed here"), nil
		case strings.Contains(args, "git push"):
			return sdk.Ask("a push is public"), nil
		case strings.Contains(args, `"git `):
			// The rewritten call goes on down the chain, and runs rewritten
			// unless a later policy says otherwise.
			a.Call.Arguments = strings.Replace(args, `"git `, `"git -C `+a.GetWorkspace()+` `, 1)
		}
		return next(ctx, a)
	})
	p.Serve()
}

// A notification listener: count the streamed answer as it arrives. The
// host sends chunks in batches; the listener still sees them one by one.
func ExamplePlugin_OnStreamChunk() {
	p := sdk.New("meter", "1.0.0")
	words := map[string]int{}
	p.OnStreamChunk(func(_ stdctx.Context, c *sdk.StreamChunk) error {
		if c.GetChunk().GetKind() == "text" {
			words[c.GetAgentId()] += len(strings.Fields(c.GetChunk().GetText()))
		}
		return nil
	})
	p.OnSessionOutcome(func(_ stdctx.Context, o *sdk.SessionOutcome) error {
		p.Logger.Info(fmt.Sprintf("a prompt was refused: %s", o.GetMessage()), "agent", o.GetAgentId(), "code", o.GetCode())
		return nil
	})
	p.Serve()
}
