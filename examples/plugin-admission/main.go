// Command plugin-admission is a dsh plugin binary: it refuses messages that
// contain a forbidden word and lets everything else through. Build it and
// mount it from config.yaml:
//
//	go build -o bin/dsh-no-secrets ./examples/plugin-admission
//
//	plugins:
//	  - id: no-secrets
//	    exec: ./bin/dsh-no-secrets
//	    config: {word: password}
package main

import (
	stdctx "context"
	"encoding/json"
	"strings"

	"github.com/dsh-go/dsh/sdk"
)

func main() { newPlugin().Serve() }

// newPlugin builds the plugin; main serves it to dsh, and main_test.go
// drives it with sdktest.
func newPlugin() *sdk.Plugin {
	var cfg struct {
		Word string `json:"word"`
	}
	p := sdk.New("no-secrets", "1.0.0")
	p.OnConfigure(func(raw json.RawMessage) error { return json.Unmarshal(raw, &cfg) })
	p.Admission(func(ctx stdctx.Context, a *sdk.Admission, next sdk.AdmissionNext) (*sdk.Decision, error) {
		word := strings.ToLower(cfg.Word)
		if word != "" && strings.Contains(strings.ToLower(a.GetMessage().GetContent()), word) {
			return sdk.Reject("no-secrets/word", "Please do not send "+cfg.Word+"s to the agent.", false), nil
		}
		return next(ctx, a) // admit
	})
	return p
}
