package sdk_test

import (
	stdctx "context"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/sdk"
)

// A plugin binary that gives the model a tool. The host validates the
// arguments against Parameters before the handler runs, so the handler
// only decodes them.
func ExamplePlugin_Tool() {
	p := sdk.New("words", "1.0.0")
	p.Tool(&sdk.ToolDecl{
		Name:         "word_count",
		Description:  "Counts the words of a text.",
		Parameters:   `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`,
		ParallelSafe: true, // reads nothing, changes nothing
	}, func(ctx stdctx.Context, inv *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		var args struct {
			Text string `json:"text"`
		}
		if err := sdk.Arguments(inv, &args); err != nil {
			return nil, err
		}
		if strings.TrimSpace(args.Text) == "" {
			return sdk.Failed("the text is empty; pass the text to count"), nil
		}
		return sdk.Text(fmt.Sprintf("%d words", len(strings.Fields(args.Text)))), nil
	})
	p.Serve() // started by a dsh host; run by hand, it says so and exits
}
