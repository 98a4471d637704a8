package web_test

import (
	stdctx "context"
	"encoding/json"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/tools"
	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: every browser is
// cancelled and waited for, every server shut down.
//
// regexp2's clock is the one goroutine let go: chroma's lexers match with
// a timeout, and regexp2 keeps one process-wide clock for all timeouts,
// which stops by itself a second after the last match.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"))
}

type noConfig struct{}

func init() {
	// test.shout registers "shout", a tool that asks for approval and
	// answers its text in capitals.
	plugin.Register("test.shout", "a tool that needs approval (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, tools.Tool{
			Name: "shout", Description: "says the text louder", Approval: tools.Ask,
			Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			Execute: func(_ stdctx.Context, call tools.Call) (tools.Result, error) {
				var args struct{ Text string }
				if err := json.Unmarshal(call.Arguments, &args); err != nil {
					return tools.Result{Content: err.Error(), IsError: true}, nil
				}
				return tools.Result{Content: strings.ToUpper(args.Text) + "!"}, nil
			},
		})
	}, tools.Key)
	// test.refuse refuses every prompt that says "forbidden".
	plugin.Register("test.refuse", "refuses prompts saying forbidden (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		_, err := agentcontroller.EventAdmission.On(ctx, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			if strings.Contains(a.Message.Content, "forbidden") {
				return agentcontroller.Reject("test/forbidden", "prompts saying forbidden are refused here", false), nil
			}
			return next.Call(ctx, a)
		})
		return err
	})
}
