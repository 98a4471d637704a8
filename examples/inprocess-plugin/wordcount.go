package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/tools"
)

// WordCount registers a word_count tool. It takes no config (plugin.None)
// and needs the tools service, so it injects tools.Key: the host applies it
// once that service is up. The tool lands in the scope it is mounted in, so
// in a preset it belongs to the agents that use the preset and no other.
var WordCount = plugin.Register("example.word-count", "a tool that counts the words of a text",
	func(ctx *dshctx.Context, _ plugin.None) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, tools.Tool{
			Name:        "word_count",
			Description: "Counts the words of a text.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			Execute:     countWords,
		})
	}, tools.Key)

// countWords reports bad arguments as a result the model reads, not as an
// error: the model made the mistake and can correct it.
func countWords(_ stdctx.Context, c tools.Call) (tools.Result, error) {
	var args struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return tools.Result{Content: "the arguments must be a JSON object with a text string", IsError: true}, nil
	}
	return tools.Result{Content: fmt.Sprintf("%d words", len(strings.Fields(args.Text)))}, nil
}
