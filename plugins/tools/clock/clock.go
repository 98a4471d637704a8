// Package clock is the tools.clock plugin: a harmless tool that tells the
// model the current date and time, in UTC or a named time zone.
package clock

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/tools"
)

// Now is the time source; tests replace it.
var Now = time.Now

// schema is closed like every built-in tool's: an argument the tool does
// not know is refused before it runs, never silently ignored.
var schema = json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string","maxLength":64,"description":"IANA time zone such as Europe/Paris; default UTC"}},"additionalProperties":false}`)

// Plugin registers the clock tool in its context's scope.
var Plugin = plugin.Register("tools.clock", "a tool that tells the current date and time", func(ctx *dshctx.Context, _ plugin.None) error {
	svc, err := tools.Key.Get(ctx)
	if err != nil {
		return err
	}
	return svc.Register(ctx, tools.Tool{
		Name:        "clock",
		Description: "Returns the current date and time.",
		Parameters:  schema,
		// Reading the clock touches nothing: it may run beside any call.
		ParallelSafe: true,
		ReadOnly:     true,
		Execute:      run,
	})
}, tools.Key)

func run(_ stdctx.Context, c tools.Call) (tools.Result, error) {
	var args struct {
		Timezone string `json:"timezone"`
	}
	if len(bytes.TrimSpace(c.Arguments)) > 0 {
		d := json.NewDecoder(bytes.NewReader(c.Arguments))
		d.DisallowUnknownFields()
		if err := d.Decode(&args); err != nil {
			return tools.Result{}, fmt.Errorf("the arguments are not a JSON object with an optional timezone and nothing else: %v", err)
		}
	}
	loc := time.UTC
	if args.Timezone != "" {
		l, err := time.LoadLocation(args.Timezone)
		if err != nil {
			return tools.Result{}, fmt.Errorf("unknown time zone %q; give an IANA name such as Europe/Paris", args.Timezone)
		}
		loc = l
	}
	return tools.Result{Content: Now().In(loc).Format(time.RFC1123)}, nil
}
